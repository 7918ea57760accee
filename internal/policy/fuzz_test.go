package policy

import (
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"
)

// destinationSeeds are the acceptance cases and the edge cases of the
// destination grammar.
var destinationSeeds = []string{
	"", "*", "*.com", "*.example.com", "a\x00b.example.com", "https://x.test", "x.test/foo",
	strings.Repeat("a", 64) + ".test", strings.Repeat("a", 63) + ".test", "x.test:70000", "x.test:443",
	"X.TEST.", "localhost", "192.0.2.1", "192.0.2.1:53", "10.0.0.0/8", "10.0.0.1/8", "2001:db8::1",
	"[2001:db8::1]:443", "[fd00::/8]:443", "fe80::1%eth0", "::ffff:1.2.3.4", "bücher.test", "xn--bcher-kva.test",
	"a b.test", "a.*.b", "*foo.com", "1.2.3", "x.test:0443", "[10.0.0.1]:80", "*.x.test.:1",
}

// FuzzParseDestination checks that ParseDestination never panics, that
// whatever it accepts satisfies the rules when checked independently, and
// that the canonical form parses back to the same destination.
func FuzzParseDestination(f *testing.F) {
	for _, s := range destinationSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDestination(s)
		if err != nil {
			if strings.ContainsFunc(err.Error(), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("error message carries a raw control character: %q", err.Error())
			}
			return
		}
		// The input itself must have been clean.
		for i := 0; i < len(s); i++ {
			if c := s[i]; c <= ' ' || c >= 0x7f {
				t.Fatalf("accepted %q with byte %#x at %d", s, c, i)
			}
		}
		if strings.Contains(s, "://") {
			t.Fatalf("accepted a URL %q", s)
		}
		checkDestination(t, s, d)
		c := d.String()
		again, err := ParseDestination(c)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", c, s, err)
		}
		if again != d || again.String() != c {
			t.Fatalf("round trip %q -> %#v -> %q -> %#v", s, d, c, again)
		}
	})
}

// checkDestination re-checks an accepted destination against the rules,
// written independently of the parser.
func checkDestination(t *testing.T, in string, d Destination) {
	t.Helper()
	switch d.Kind {
	case Host, Wildcard:
		name := d.Name
		if name != strings.ToLower(name) || strings.HasSuffix(name, ".") {
			t.Fatalf("%q: name %q is not canonical", in, name)
		}
		if len(name) > 253 {
			t.Fatalf("%q: name of %d bytes", in, len(name))
		}
		labels := strings.Split(name, ".")
		if len(labels) < 2 {
			t.Fatalf("%q: %q has fewer than two labels", in, name)
		}
		for _, l := range labels {
			if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
				t.Fatalf("%q: bad label %q", in, l)
			}
			for _, c := range []byte(l) {
				if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
					t.Fatalf("%q: byte %q in label %q", in, c, l)
				}
			}
		}
		last := labels[len(labels)-1]
		if strings.Trim(last, "0123456789") == "" {
			t.Fatalf("%q: all-numeric last label", in)
		}
		if d.Prefix.IsValid() {
			t.Fatalf("%q: a name with a prefix", in)
		}
		if d.Kind == Host && !d.matchCanonical(name) {
			t.Fatalf("%q does not match its own name", in)
		}
		if d.Kind == Wildcard && (d.matchCanonical(name) || !d.matchCanonical("a."+name)) {
			t.Fatalf("%q: a wildcard must match strict subdomains only", in)
		}
	case Prefix:
		p := d.Prefix
		if !p.IsValid() || p.Masked() != p || p.Addr().Zone() != "" || p.Addr().Is4In6() || d.Name != "" {
			t.Fatalf("%q: bad prefix %v", in, p)
		}
	default:
		t.Fatalf("%q: kind %d", in, d.Kind)
	}
	if d.Kind == Prefix && d.Prefix.IsSingleIP() && d.Prefix.Addr().IsUnspecified() {
		t.Fatalf("%q: the unspecified address accepted", in)
	}
}

// FuzzParse feeds whole policy files to the loader: it must never panic,
// must report errors with a position inside the file, and whatever it
// accepts must hold only valid destinations and normalize to a fixed point.
func FuzzParse(f *testing.F) {
	f.Add([]byte(badPolicy))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"network": {"presets": ["github", "npm"], "allow": ["x.test:443", "*.y.test", "10.0.0.0/8"], "deny": ["bad.y.test"]}}`))
	f.Add([]byte(`{"image": {"user": {"name": "a", "uid": 5, "gid": 5}, "packages": ["g++"]}, "agent": {"claudeCode": "none"}}`))
	f.Add([]byte(`{"sandbox": {"enabled": true, "denyRead": ["~/x", "**/y"], "allowWrite": ["z"]}, "network": {"dns": {"upstream": ["::1"]}}}`))
	for _, s := range destinationSeeds {
		f.Add([]byte(`{"network": {"allow": ["` + strings.ReplaceAll(s, "\x00", `\u0000`) + `"]}}`))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := Parse("f", raw)
		if err != nil {
			if p != nil {
				t.Fatal("a Policy came back with an error")
			}
			errs, ok := err.(*Errors)
			if !ok || len(errs.List) == 0 {
				t.Fatalf("error %T %v is not a non-empty *Errors", err, err)
			}
			if len(raw) > MaxFileSize {
				return
			}
			lines := strings.Count(string(raw), "\n") + 1
			for _, e := range errs.List {
				if strings.ContainsFunc(e.Path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
					t.Fatalf("path carries a raw control character: %q", e.Path)
				}
				if e.Line < 1 || e.Line > lines || e.Col < 1 || e.File != "f" {
					t.Fatalf("error outside the file (%d lines): %+v", lines, e)
				}
				if !utf8.ValidString(e.Msg) || strings.ContainsFunc(e.Msg, func(r rune) bool { return r < 0x20 && r != '\n' }) {
					t.Fatalf("message carries a raw control character: %q", e.Msg)
				}
			}
			return
		}
		for _, list := range [][]Destination{p.Network.Allow, p.Network.Deny} {
			for _, d := range list {
				again, err := ParseDestination(d.String())
				if err != nil || again != d {
					t.Fatalf("accepted destination %#v does not round-trip: %v", d, err)
				}
				checkDestination(t, d.String(), d)
			}
		}
		for _, a := range p.Network.Allow {
			for _, d := range p.Network.Deny {
				if d.covers(a) {
					t.Fatalf("allow %v survived a deny %v that covers it", a, d)
				}
			}
		}
		for _, u := range p.Network.DNS.Upstream {
			if !u.IsValid() || u.Port() == 0 || u.Addr().Zone() != "" || u.Addr() == (netip.Addr{}) {
				t.Fatalf("bad upstream %v", u)
			}
		}
		if p.Image.User.UID == 0 || p.Image.User.GID == 0 || p.Image.User.Name == "root" {
			t.Fatalf("root accepted: %+v", p.Image.User)
		}
		norm, err := p.Normalize()
		if err != nil {
			t.Fatalf("Normalize: %v", err)
		}
		q, err := Parse("f", norm)
		if err != nil {
			t.Fatalf("Parse(normalized): %v\n%s", err, norm)
		}
		norm2, err := q.Normalize()
		if err != nil || string(norm2) != string(norm) {
			t.Fatalf("normalize is not a fixed point: %v\n%s\n%s", err, norm, norm2)
		}
	})
}
