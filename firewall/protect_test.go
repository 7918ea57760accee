package firewall

import "testing"

// TestProtectWildcard: a protect entry "*.domain" protects every allowed
// name under domain (a service's sibling hosts), not domain itself nor a
// name that merely ends the same way.
func TestProtectWildcard(t *testing.T) {
	c := Config{
		Allow:   []Destination{{Name: "git.test", Wildcard: true, Port: 443}, {Name: "git.test", Port: 443}, {Name: "evilgit.test", Port: 443}},
		Protect: []string{"*.git.test"},
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"api.git.test": true, "a.b.git.test": true, "API.Git.Test.": true, "git.test": false, "evilgit.test": false} {
		if v := c.Match(name); !v.Allowed || v.Protected != want {
			t.Errorf("Match(%q) = %+v, want protected %v", name, v, want)
		}
	}
	for _, bad := range []string{"*.", "*", "a..test", "*.*.x.test"} {
		if err := (Config{Protect: []string{bad}}).Validate(); err == nil {
			t.Errorf("Validate accepts protect %q", bad)
		}
	}
}
