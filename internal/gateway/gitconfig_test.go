package gateway

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/devbox-dev/devbox/internal/policy"
)

func TestWriteGitConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gitconfig")
	os.WriteFile(path, []byte("[core]\n\teditor = vi\n"), 0o644)
	creds := policy.Credentials{Git: []policy.GitCredential{{Host: "github.com", Secret: "s", Repos: []string{"a/b"}}}}
	block := GitConfig(creds, "127.0.0.1:53541")
	for i := 0; i < 2; i++ { // idempotent
		if err := WriteGitConfig(path, block); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(path)
	want := "[core]\n\teditor = vi\n" + gitBegin + "\n" +
		"[url \"http://127.0.0.1:53541/git/github.com/\"]\n" +
		"\tinsteadOf = https://github.com/\n\tinsteadOf = git@github.com:\n\tinsteadOf = ssh://git@github.com/\n" +
		gitEnd + "\n"
	if string(got) != want {
		t.Errorf("gitconfig:\n%s\nwant:\n%s", got, want)
	}
	// A policy without git routes takes the block out again.
	if err := WriteGitConfig(path, GitConfig(policy.Credentials{}, "x")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "[core]\n\teditor = vi\n" {
		t.Errorf("after removal:\n%s", got)
	}
}
