package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestParseDestinationAccepts(t *testing.T) {
	tests := []struct {
		in   string
		want Destination
		str  string // canonical form; "" means in
	}{
		{"api.example.com", Destination{Kind: Host, Name: "api.example.com"}, ""},
		{"API.Example.COM", Destination{Kind: Host, Name: "api.example.com"}, "api.example.com"},
		{"x.test.", Destination{Kind: Host, Name: "x.test"}, "x.test"},
		{"x.test:443", Destination{Kind: Host, Name: "x.test", Port: 443}, ""},
		{"a-b.c1.test:65535", Destination{Kind: Host, Name: "a-b.c1.test", Port: 65535}, ""},
		{"xn--bcher-kva.test", Destination{Kind: Host, Name: "xn--bcher-kva.test"}, ""},
		{"*.example.com", Destination{Kind: Wildcard, Name: "example.com"}, ""},
		{"*.Example.com:8443", Destination{Kind: Wildcard, Name: "example.com", Port: 8443}, "*.example.com:8443"},
		{"192.0.2.1", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("192.0.2.1/32")}, ""},
		{"192.0.2.1:53", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("192.0.2.1/32"), Port: 53}, ""},
		{"192.0.2.1/32", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("192.0.2.1/32")}, "192.0.2.1"},
		{"10.0.0.0/8", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("10.0.0.0/8")}, ""},
		{"10.0.0.0/8:443", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("10.0.0.0/8"), Port: 443}, ""},
		{"2001:db8::1", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("2001:db8::1/128")}, ""},
		{"[2001:db8::1]", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("2001:db8::1/128")}, "2001:db8::1"},
		{"[2001:db8::1]:443", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("2001:db8::1/128"), Port: 443}, ""},
		{"fd00::/8", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("fd00::/8")}, ""},
		{"[fd00::/8]:443", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("fd00::/8"), Port: 443}, ""},
		{"0.0.0.0/0", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("0.0.0.0/0")}, ""},
		{"::/0", Destination{Kind: Prefix, Prefix: netip.MustParsePrefix("::/0")}, ""},
		{strings.Repeat(strings.Repeat("a", 60)+".", 4) + "test.test", Destination{Kind: Host, Name: strings.Repeat(strings.Repeat("a", 60)+".", 4) + "test.test"}, ""},
		{strings.Repeat("a", 63) + ".test", Destination{Kind: Host, Name: strings.Repeat("a", 63) + ".test"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDestination(tt.in)
			if err != nil {
				t.Fatalf("ParseDestination(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseDestination(%q) = %#v, want %#v", tt.in, got, tt.want)
			}
			want := tt.str
			if want == "" {
				want = tt.in
			}
			if got.String() != want {
				t.Errorf("String() = %q, want %q", got.String(), want)
			}
			again, err := ParseDestination(got.String())
			if err != nil || again != got {
				t.Errorf("round trip of %q: %#v, %v", got.String(), again, err)
			}
			var u Destination
			if err := u.UnmarshalText([]byte(tt.in)); err != nil || u != got {
				t.Errorf("UnmarshalText: %#v, %v", u, err)
			}
			b, err := got.MarshalText()
			if err != nil || string(b) != want {
				t.Errorf("MarshalText = %q, %v", b, err)
			}
		})
	}
}

func TestParseDestinationRejects(t *testing.T) {
	tests := []struct {
		in, why string // why: a substring of the reason
	}{
		{"", "empty"},
		{"*", "bare"},
		{"*.com", "at least two labels"},
		{"*.com.", "at least two labels"},
		{"a.*.b.test", "whole first label"},
		{"*foo.com", "whole first label"},
		{"**.foo.com", "whole first label"},
		{"a\x00b.example.com", "NUL"},
		{"a\nb.test", "control character"},
		{"a\tb.test", "control character"},
		{"a\x7fb.test", "control character"},
		{"a b.test", "space"},
		{" x.test", "space"},
		{"x.test ", "space"},
		{"bücher.test", "punycode"},
		{"https://x.test", "URL"},
		{"http://x.test:80/", "URL"},
		{"x.test/foo", "path"},
		{"/etc/passwd", "path"},
		{strings.Repeat("a", 64) + ".test", "63"},
		{strings.Repeat(strings.Repeat("a", 60)+".", 4) + "tests.test", "limit is 253"},
		{strings.Repeat("a.", 200) + "test", "too long"},
		{"x.test:70000", "out of range"},
		{"x.test:0", "out of range"},
		{"x.test:", "empty port"},
		{"x.test:0443", "leading zero"},
		{"x.test:https", "not a decimal"},
		{"x.test:+443", "not a decimal"},
		{"localhost", "two labels"},
		{"intranet", "two labels"},
		{"x..test", "empty label"},
		{".x.test", "empty label"},
		{"-x.test", "hyphen"},
		{"x-.test", "hyphen"},
		{"x_y.test", "not allowed"},
		{"user@x.test", "not allowed"},
		{"1.2.3", "IP address"},
		{"1.2.3.256", "IP address"},
		{"example.123", "IP address"},
		{"10.0.0.1/8", "host bits"},
		{"10.0.0.0/33", "prefix length"},
		{"[10.0.0.1]:80", "only for IPv6"},
		{"[2001:db8::1]443", "after \"]\""},
		{"[2001:db8::1", "missing"},
		{"fe80::1%eth0", "zone"},
		{"::ffff:10.0.0.1", "IPv4-mapped"},
		{"::", "unspecified"},
		{"0.0.0.0:80", "unspecified"},
		{"[::]:443", "unspecified"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := ParseDestination(tt.in)
			if err == nil {
				t.Fatalf("ParseDestination(%q) = %v, want an error", tt.in, d)
			}
			var de *DestinationError
			if !errors.As(err, &de) {
				t.Fatalf("error is %T, want *DestinationError", err)
			}
			if !strings.Contains(de.Reason, tt.why) {
				t.Errorf("reason %q does not contain %q", de.Reason, tt.why)
			}
			for _, r := range err.Error() {
				if r < 0x20 || r == 0x7f {
					t.Errorf("error message carries a raw control character: %q", err.Error())
				}
			}
		})
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		deny, allow string
		want        bool
	}{
		{"x.test", "x.test:443", true},
		{"x.test:443", "x.test:443", true},
		{"x.test:443", "x.test", false},
		{"x.test:22", "x.test:443", false},
		{"*.x.test", "a.x.test:443", true},
		{"*.x.test", "*.a.x.test", true},
		{"*.x.test", "*.x.test:443", true},
		{"*.x.test", "x.test", false},
		{"a.x.test", "*.x.test", false},
		{"10.0.0.0/8", "10.1.0.0/16", true},
		{"10.0.0.0/8", "10.1.2.3", true},
		{"10.1.0.0/16", "10.0.0.0/8", false},
		{"::/0", "10.0.0.0/8", false},
		{"fd00::/8", "[fd00::1]:443", true},
		{"10.0.0.0/8", "x.test", false},
	}
	for _, tt := range tests {
		if got := mustDest(t, tt.deny).covers(mustDest(t, tt.allow)); got != tt.want {
			t.Errorf("%s covers %s = %v, want %v", tt.deny, tt.allow, got, tt.want)
		}
	}
}

func mustDest(t testing.TB, s string) Destination {
	t.Helper()
	d, err := ParseDestination(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
