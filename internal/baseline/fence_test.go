package baseline

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/firewall/fwpolicy"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// credBase allows a credential host on every port, a mirror that (in the
// world below) shares its address, and the static range holding it.
const credBase = `{
  "network": {"allow": ["hooks.corp.test", "mirror.corp.test", "10.1.0.0/16", "pkg.test:443"]},
  "credentials": {"http": [{"host": "hooks.corp.test", "header": "Authorization", "value": "Bearer ${secret}", "secret": "corp-api"}]},
}`

// credWorld: the credential host and the mirror answer the same address,
// inside the static range.
var (
	credAddr  = netip.MustParseAddr("10.1.2.3")
	credWorld = firewall.Answers{"hooks.corp.test": {credAddr}, "mirror.corp.test": {credAddr}, "pkg.test": {netip.MustParseAddr("192.0.2.80")}}
)

// TestDroppedRouteStaysProtected: a repository drops the baseline's route
// and keeps the host reachable on another port, on 80, through another
// name sharing its address, or through a static range holding it. Before,
// the resolved fence (fwpolicy.Config of the repository) let uid 1000
// reach the credential host with any key; now each is accepted and the
// fence FenceConfig builds refuses uid 1000 on every port, by name,
// through the other name and through the range, while the baseline's
// decisions contain it.
func TestDroppedRouteStaysProtected(t *testing.T) {
	base := mustParse(t, credBase)
	for _, allow := range []string{`"hooks.corp.test:443"`, `"hooks.corp.test:8443"`, `"hooks.corp.test:80"`, `"mirror.corp.test"`, `"10.1.0.0/16"`, `"10.1.2.3:8443"`, `"pkg.test:443"`} {
		t.Run(allow, func(t *testing.T) {
			repo := explain(t, `{"network": {"allow": [`+allow+`]}}`)
			if err := Check(base, "base", repo); err != nil {
				t.Fatalf("Check: %v", err)
			}
			fence := FenceConfig(base, repo.Policy)
			m, err := firewall.NewModel(fence, credWorld)
			if err != nil {
				t.Fatal(err)
			}
			for _, port := range []uint16{80, 443, 8443} {
				for _, name := range []string{"hooks.corp.test", "mirror.corp.test", ""} {
					p := firewall.Packet{UID: 1000, Proto: "tcp", Dst: netip.AddrPortFrom(credAddr, port), Name: name}
					if d := m.Decide(p); d.Out {
						t.Errorf("%s: %+v; want refused", p, d)
					}
				}
			}
			if w, err := Widens(fwpolicy.Config(base), fence, credWorld); err != nil || w != nil {
				t.Errorf("Widens in the shared-address world: %v, %v", w, err)
			}
			if allow == `"pkg.test:443"` {
				return
			}
			// What the repository's own Config (the fence before) did: uid
			// 1000 reached the credential host's address.
			old, _ := firewall.NewModel(fwpolicy.Config(repo.Policy), credWorld)
			reached := false
			for _, port := range []uint16{80, 443, 8443} {
				for _, name := range []string{"hooks.corp.test", "mirror.corp.test", ""} {
					reached = reached || old.Decide(firewall.Packet{UID: 1000, Proto: "tcp", Dst: netip.AddrPortFrom(credAddr, port), Name: name}).Out
				}
			}
			if !reached {
				t.Errorf("the repository's own Config did not reach the host: this case shows nothing")
			}
			// And the compiled check sees that fence as wider than the
			// baseline's, in its own world.
			if w, err := Widens(fwpolicy.Config(base), fwpolicy.Config(repo.Policy), nil); err != nil || w == nil {
				t.Errorf("Widens(the repository's own Config) = %v, %v; want a widening", w, err)
			} else if w.Packet.UID != 1000 || w.Baseline.Reason != firewall.ChainProtect {
				t.Errorf("widening %v; want uid 1000 stopped by the baseline's protect rule", w)
			}
		})
	}
}

// TestCarriedHostResolvable: a carried host the repository does not allow
// at all stays answerable (on 443, the baseline's entry) so its addresses
// enter the protect set; the gateway's uid alone could connect.
func TestCarriedHostResolvable(t *testing.T) {
	base := mustParse(t, credBase)
	fence := FenceConfig(base, explain(t, `{"network": {"allow": ["mirror.corp.test"]}}`).Policy)
	if v := fence.Match("hooks.corp.test"); !v.Allowed || !v.Protected || v.AnyPort || fmt.Sprint(v.Ports) != "[443]" {
		t.Errorf("carried host verdict %+v; want allowed on 443 only, protected", v)
	}
	if fence.ProtectUID != layout.GatewayUID {
		t.Errorf("ProtectUID %d", fence.ProtectUID)
	}
}

// TestDeniedCarriedHostRefused: denying a baseline credential host would
// stop the filter from answering it, so nothing would protect its
// addresses from another allowed name sharing them: refused, with a hint.
func TestDeniedCarriedHostRefused(t *testing.T) {
	base := mustParse(t, credBase)
	err := Check(base, "base", explain(t, `{"network": {"allow": ["mirror.corp.test"], "deny": ["hooks.corp.test"]}}`))
	var vs *Violations
	if !errors.As(err, &vs) || len(vs.List) != 1 || !strings.Contains(vs.List[0].At.Msg, "leave it out of network.allow instead") {
		t.Fatalf("Check = %v; want one violation about the denied credential host", err)
	}
}

func mustParse(t *testing.T, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("base.jsonc", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func explain(t *testing.T, src string) *policy.Explanation {
	t.Helper()
	ex, err := policy.Explain("repo.jsonc", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// TestSandboxPathsChecked: lists that lay textually within the baseline's
// and that the sandbox's mount order or path resolution does not keep.
func TestSandboxPathsChecked(t *testing.T) {
	base := mustParse(t, `{"sandbox": {"enabled": true, "allowWrite": ["/opt/cache", "/srv/*.d", "sub/out"], "denyWrite": ["locked.txt", "/opt/cache/locked"]}}`)
	for _, tc := range []struct {
		sandbox string
		want    string // "" accepted
	}{
		{`"allowWrite": ["/opt/cache/go"], "denyWrite": ["locked.txt", "/opt/cache/locked"]`, ""},
		{`"allowWrite": ["/srv/*.d"], "denyWrite": ["locked.txt", "/opt/cache/locked"]`, ""},
		{`"denyWrite": ["locked.txt", "/opt/cache"]`, `the baseline's "/opt/cache/locked" is missing`},
		{`"allowWrite": ["/opt/cache/*"], "denyWrite": ["locked.txt", "/opt/cache/locked"]`, "is a pattern"},
		{`"denyWrite": ["/", "/opt/cache/locked"]`, `the baseline's "locked.txt" is missing`},
		{`"denyWrite": ["/", "locked.txt"]`, `the baseline's "/opt/cache/locked" is missing`},
	} {
		err := Check(base, "base", explain(t, `{"sandbox": {"enabled": true, `+tc.sandbox+`}}`))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.sandbox, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Check = %v; want %q", tc.sandbox, err, tc.want)
		}
	}
}

func TestKeeps(t *testing.T) {
	for _, c := range []struct {
		d, r     string
		writable []string
		want     bool
	}{
		{"sub/x", "sub", nil, true},
		{"sub/out/x", "sub", []string{"sub/out"}, false},
		{"sub/x", "sub", []string{"sub/out"}, true},
		{"locked.txt", "/", nil, false},
		{"/opt/cache/locked", "/opt/cache", nil, false},
		{"~/.ssh", "~", nil, false},
		{"/opt/cache/locked", "/opt/cache/locked", nil, true},
	} {
		if got := keeps(c.d, c.r, c.writable); got != c.want {
			t.Errorf("keeps(%q, %q, %q) = %v", c.d, c.r, c.writable, got)
		}
	}
}
