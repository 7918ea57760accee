package policy

import (
	_ "crypto/sha512" // go-digest accepts sha384/sha512 only when linked in
	"strings"
	"testing"

	"github.com/distribution/reference"
)

// The policy package keeps to the standard library, so checkRef carries a
// copy of distribution/reference's grammar. These tests hold the copy to the
// library (test-only imports do not count for TestDependencies).

// refAgrees reports where checkRef and reference.Parse disagree on s
// ("" when they agree): on validity, and on whether a tag and a digest are
// present.
func refAgrees(s string) string {
	tag, digest, reason := checkRef(s)
	ref, err := reference.Parse(s)
	switch {
	case len(s) > 512:
		// checkRef's own cap, stricter than the library on purpose.
		if reason == "" {
			return "accepted a reference over 512 bytes"
		}
		return ""
	case (reason == "") != (err == nil):
		return "checkRef: " + orOK(reason) + "; reference.Parse: " + orOK(errString(err))
	case err != nil:
		return ""
	}
	_, refTag := ref.(reference.Tagged)
	_, refDigest := ref.(reference.Digested)
	if tag != refTag || digest != refDigest {
		return "tag/digest differ"
	}
	return ""
}

func orOK(s string) string {
	if s == "" {
		return "ok"
	}
	return s
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestImageRefMatchesDistributionReference(t *testing.T) {
	hex := func(n int) string { return strings.Repeat("0123456789abcdef", 8)[:n] }
	domains := []string{"", "localhost/", "registry.test:5000/", "127.0.0.1:5000/", "[::1]:5000/", "[::ffff:1.2.3.4]/",
		"a-b.c/", "-bad.test/", "bad-.test/", "UPPER.test/", "x:port/", "a..b/", "host:5000:1/"}
	paths := []string{"x", "a/b/c", "a__b", "a___b", "a--b", "a..b", "a.b", "a_b-c.d/e", "Aa", "a/", "/a", "", "a//b", "_a", "a-", "é"}
	tags := []string{"", ":v1", ":-v", ":_v", ":" + strings.Repeat("w", 128), ":" + strings.Repeat("w", 129), ":a.b-c_D", ":", ":a/b"}
	digests := []string{"", "@sha256:" + hex(64), "@sha256:" + hex(63), "@sha256:" + hex(65), "@sha256:" + strings.ToUpper(hex(64)),
		"@sha384:" + hex(96), "@sha512:" + hex(128), "@sha512:" + hex(64), "@md5:" + hex(32), "@sha256:", "@" + hex(64)}
	n := 0
	for _, d := range domains {
		for _, p := range paths {
			for _, tg := range tags {
				for _, dg := range digests {
					s := d + p + tg + dg
					n++
					if why := refAgrees(s); why != "" {
						t.Errorf("%q: %s", s, why)
					}
				}
			}
		}
	}
	for _, s := range []string{strings.Repeat("a", 255), strings.Repeat("a", 256), "r.test/" + strings.Repeat("a", 255),
		strings.Repeat("a/", 200) + "a", "localhost:5000/" + strings.Repeat("b", 520)} {
		n++
		if why := refAgrees(s); why != "" {
			t.Errorf("%.40q…: %s", s, why)
		}
	}
	if n < 10000 {
		t.Fatalf("only %d references compared", n)
	}
}

// FuzzImageRefMatchesDistributionReference explores beyond the table:
// go test ./internal/policy -fuzz FuzzImageRef.
func FuzzImageRefMatchesDistributionReference(f *testing.F) {
	for _, s := range []string{"debian:bookworm", "registry.test:5000/team/img:v1@sha256:" + strings.Repeat("ab", 32),
		"[::1]/x", "A/b", "a__b", "a:b:c", "x@md5:" + strings.Repeat("0", 32)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if why := refAgrees(s); why != "" {
			t.Errorf("%q: %s", s, why)
		}
	})
}
