package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func testLock() *Lock {
	return &Lock{
		Version:         LockVersion,
		Devbox:          "1.2.3",
		SourceDateEpoch: 1700000000,
		Base:            LockedImage{Ref: "registry.test:5000/base:bookworm", Digest: testDigest},
		ClaudeCode: LockedClaudeCode{
			Version: "2.1.332",
			Platforms: map[string]LockedPackage{
				"linux/arm64": {Package: "@anthropic-ai/claude-code-linux-arm64", Tarball: "https://npm.test/a.tgz", Integrity: "sha512-AAAA"},
				"linux/amd64": {Package: "@anthropic-ai/claude-code-linux-x64", Tarball: "https://npm.test/x.tgz", Integrity: "sha512-BBBB"},
			},
		},
		Unpinned: []string{"z last", "a first"},
	}
}

// The canonical form is what reviewers diff: fixed field order, sorted maps
// and lists, two-space indent, final newline.
const wantLockJSON = `{
  "lockVersion": 1,
  "devbox": "1.2.3",
  "sourceDateEpoch": 1700000000,
  "base": {
    "ref": "registry.test:5000/base:bookworm",
    "digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  },
  "claudeCode": {
    "version": "2.1.332",
    "platforms": {
      "linux/amd64": {
        "package": "@anthropic-ai/claude-code-linux-x64",
        "tarball": "https://npm.test/x.tgz",
        "integrity": "sha512-BBBB"
      },
      "linux/arm64": {
        "package": "@anthropic-ai/claude-code-linux-arm64",
        "tarball": "https://npm.test/a.tgz",
        "integrity": "sha512-AAAA"
      }
    }
  },
  "unpinned": [
    "a first",
    "z last"
  ]
}
`

func TestLockMarshalCanonical(t *testing.T) {
	b, err := testLock().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != wantLockJSON {
		t.Errorf("Marshal:\n%s\nwant:\n%s", b, wantLockJSON)
	}
}

func TestLockRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), LockFileName)
	if err := WriteLock(path, testLock()); err != nil {
		t.Fatal(err)
	}
	l, err := ReadLock(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != wantLockJSON {
		t.Errorf("after a round trip:\n%s\nwant:\n%s", b, wantLockJSON)
	}
	// Writing again must not change a byte: the lock is stable.
	if err := WriteLock(path, l); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(path)
	if string(again) != wantLockJSON {
		t.Errorf("rewritten lock differs:\n%s", again)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("WriteLock left %d files in the directory, want only the lock", len(entries))
	}
}

func TestReadLockMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), LockFileName)
	_, err := ReadLock(path)
	if !errors.Is(err, ErrNoLock) {
		t.Fatalf("ReadLock(missing) = %v, want ErrNoLock", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "devbox lock") {
		t.Errorf("error %q should name the file and the fix", err)
	}
}

func TestParseLockErrors(t *testing.T) {
	valid := wantLockJSON
	tests := []struct {
		name, in, want string
	}{
		{"unknown field", strings.Replace(valid, `"devbox"`, `"devboxx"`, 1), "unknown field"},
		{"trailing data", valid + "{}", "trailing data"},
		{"other version", strings.Replace(valid, `"lockVersion": 1`, `"lockVersion": 2`, 1), "version 2 is not supported"},
		{"tag not digest", strings.Replace(valid, testDigest, "bookworm", 1), "not a sha256 digest"},
		{"short digest", strings.Replace(valid, testDigest, "sha256:abc", 1), "not a sha256 digest"},
		{"sha1 integrity", strings.Replace(valid, "sha512-BBBB", "sha1-BBBB", 1), "not a sha512 integrity"},
		{"no platform", noPlatforms(t), "has no pinned platform"},
		{"none with platforms", strings.Replace(valid, `"version": "2.1.332"`, `"version": "none"`, 1), "none but platforms"},
		{"not json", "lockVersion = 1", "invalid lock file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLock([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseLock = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func noPlatforms(t *testing.T) string {
	l := testLock()
	l.ClaudeCode.Platforms = nil
	b, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLockedImagePinned(t *testing.T) {
	tests := []struct{ ref, want string }{
		{"registry.test:5000/base:bookworm", "registry.test:5000/base@" + testDigest},
		{"registry.test:5000/base", "registry.test:5000/base@" + testDigest},
		{"registry.test/a/b@sha256:ffff", "registry.test/a/b@" + testDigest},
		{"base:1", "base@" + testDigest},
	}
	for _, tt := range tests {
		if got := (LockedImage{Ref: tt.ref, Digest: testDigest}).Pinned(); got != tt.want {
			t.Errorf("Pinned(%q) = %q, want %q", tt.ref, got, tt.want)
		}
	}
}

func TestLockCheck(t *testing.T) {
	base := func() *Policy {
		p := &Policy{}
		p.Image.Base = "registry.test:5000/base:bookworm"
		p.Agent.ClaudeCode = "2.1.332"
		return p
	}
	tests := []struct {
		name      string
		edit      func(p *Policy)
		version   string
		platforms []string
		want      []string // substrings; none = fresh
	}{
		{name: "fresh", version: "1.2.3", platforms: []string{"linux/amd64"}},
		{name: "network change is not a lock input", version: "1.2.3", edit: func(p *Policy) {
			p.Network.Allow = []Destination{{Kind: Host, Name: "example.test"}}
			p.Sandbox.Enabled = true
		}},
		{name: "base changed", version: "1.2.3", edit: func(p *Policy) { p.Image.Base = "registry.test:5000/base:trixie" },
			want: []string{`image.base is "registry.test:5000/base:trixie"`}},
		{name: "claude changed", version: "1.2.3", edit: func(p *Policy) { p.Agent.ClaudeCode = "2.1.333" },
			want: []string{`agent.claudeCode is "2.1.333"`}},
		{name: "platform not pinned", version: "1.2.3", platforms: []string{"linux/riscv64"},
			want: []string{"not pinned for platform linux/riscv64"}},
		{name: "devbox version", version: "1.2.4",
			want: []string{"written by devbox 1.2.3, this is devbox 1.2.4"}},
		{name: "everything", version: "2.0.0", edit: func(p *Policy) { p.Image.Base = "x"; p.Agent.ClaudeCode = ClaudeCodeNone },
			want: []string{"image.base", "agent.claudeCode", "devbox 2.0.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			if tt.edit != nil {
				tt.edit(p)
			}
			err := testLock().Check(p, tt.version, tt.platforms)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Check = %v, want fresh", err)
				}
				return
			}
			var se *StaleError
			if !errors.As(err, &se) {
				t.Fatalf("Check = %v, want a *StaleError", err)
			}
			if len(se.Reasons) != len(tt.want) {
				t.Errorf("reasons %q, want %d", se.Reasons, len(tt.want))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), "devbox lock") {
				t.Errorf("error %q does not say how to fix it", err)
			}
		})
	}
}
