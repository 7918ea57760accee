package gateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
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

// TestGitConfigEnv asks git itself: the environment form must give the same
// url.*.insteadOf entries as the file form.
func TestGitConfigEnv(t *testing.T) {
	devboxtest.LookBinary(t, "git")
	creds := policy.Credentials{Git: []policy.GitCredential{
		{Host: "git.example.test", Secret: "s", Repos: []string{"a/b"}},
		{Host: "other.example.test", Secret: "t", Repos: []string{"c/d"}},
	}}
	dir := t.TempDir()
	file := filepath.Join(dir, "gitconfig")
	if err := os.WriteFile(file, []byte(GitConfig(creds, "127.0.0.1:53541")), 0o644); err != nil {
		t.Fatal(err)
	}
	list := func(env []string, args ...string) string {
		cmd := exec.Command("git", append([]string{"config", "--list"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append([]string{"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}, env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git config --list %v: %v", args, err)
		}
		return string(out)
	}
	var env []string
	for _, kv := range GitConfigEnv(creds, "127.0.0.1:53541") {
		env = append(env, kv[0]+"="+kv[1])
	}
	fromFile, fromEnv := list(nil, "--file", file), list(env)
	if fromFile != fromEnv || fromFile == "" {
		t.Errorf("git reads the file as\n%s\nand the environment as\n%s", fromFile, fromEnv)
	}
	if GitConfigEnv(policy.Credentials{}, "127.0.0.1:53541") != nil {
		t.Error("no git credentials must give no environment")
	}
}
