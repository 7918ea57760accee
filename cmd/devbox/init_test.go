package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// TestInitCommandBuildMode runs `devbox init` twice on a locked repository
// with the real image renderer: the Dockerfile pins the locked base, copies
// the context files and carries the fence's label; the second run prints
// "unchanged" for every file.
func TestInitCommandBuildMode(t *testing.T) {
	root := t.TempDir()
	// The test binary itself is the Linux executable init copies.
	plat := "linux/" + runtime.GOARCH
	if err := newApp().Run([]string{"devbox", "init", "--binary", os.Args[0], "--platform", plat, root}); err != nil {
		// Without a lock the Dockerfile waits; that is not an error.
		t.Fatalf("first init: %v", err)
	}
	pol, err := policy.Load(filepath.Join(root, devcontainer.PolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	lock := &policy.Lock{
		Version:         policy.LockVersion,
		Devbox:          version,
		SourceDateEpoch: 1767225600,
		Base:            policy.LockedImage{Ref: pol.Image.Base, Digest: "sha256:" + strings.Repeat("2", 64)},
		ClaudeCode: policy.LockedClaudeCode{Version: pol.Agent.ClaudeCode, Platforms: map[string]policy.LockedPackage{
			plat: {
				Package:   "@anthropic-ai/claude-code-linux-x64",
				Tarball:   "https://registry.npmjs.org/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-" + pol.Agent.ClaudeCode + ".tgz",
				Integrity: "sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw==",
			},
		}},
		Unpinned: []string{},
	}
	if err := policy.WriteLock(filepath.Join(root, devcontainer.LockFile), lock); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	app := newApp()
	app.Writer = &out
	args := []string{"devbox", "init", "--binary", os.Args[0], "--platform", plat, root}
	if err := app.Run(args); err != nil {
		t.Fatalf("init after lock: %v", err)
	}
	df, err := os.ReadFile(filepath.Join(root, devcontainer.DockerfileFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		devcontainer.GeneratedMarker,
		"FROM " + lock.Base.Pinned(),
		"COPY devbox " + layout.BinaryPath,
		"LABEL devcontainer.metadata=",
		`\"entrypoint\":\"/usr/local/bin/devbox entrypoint\"`,
	} {
		if !strings.Contains(string(df), want) {
			t.Errorf("Dockerfile lacks %q:\n%s", want, df)
		}
	}
	out.Reset()
	if err := app.Run(args); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(line, string(devcontainer.Unchanged)) {
			t.Errorf("second run: %q", line)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 6 {
		t.Errorf("second run printed %d lines, want 6:\n%s", n, out.String())
	}
}

// TestInitLock: `devbox init --lock` takes a repository to a complete build
// mode in one run — policy, lock, Dockerfile — and a policy edit that moves
// a lock input (the base) is relocked by the next `init --lock` instead of
// failing as stale. The base lives in an in-memory registry on loopback;
// Claude Code is left out so nothing asks the npm registry.
func TestInitLock(t *testing.T) {
	reg := devboxtest.NewRegistry(t)
	digest1 := devboxtest.PushRandom(t, reg+"/base:one")
	digest2 := devboxtest.PushRandom(t, reg+"/base:two")

	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, ".devcontainer"), 0o755)
	pol := `{
  "image": { "base": "` + reg + `/base:one" },
  "agent": { "claudeCode": "none" },
  "network": { "presets": ["anthropic"] },
}
`
	polPath := filepath.Join(root, devcontainer.PolicyFile)
	if err := os.WriteFile(polPath, []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	plat := "linux/" + runtime.GOARCH
	initLock := func() string {
		t.Helper()
		var out bytes.Buffer
		app := newApp()
		app.Writer = &out
		if err := app.Run([]string{"devbox", "init", "--lock", "--binary", os.Args[0], "--platform", plat, root}); err != nil {
			t.Fatalf("init --lock: %v\n%s", err, out.String())
		}
		return out.String()
	}

	out := initLock()
	if strings.Contains(out, "pending") {
		t.Errorf("init --lock left a file pending:\n%s", out)
	}
	l, err := policy.ReadLock(filepath.Join(root, devcontainer.LockFile))
	if err != nil {
		t.Fatal(err)
	}
	if l.Base.Digest != digest1 {
		t.Errorf("lock pins base %s, want %s", l.Base.Digest, digest1)
	}
	df, err := os.ReadFile(filepath.Join(root, devcontainer.DockerfileFile))
	if err != nil {
		t.Fatalf("no Dockerfile after one init --lock: %v\n%s", err, out)
	}
	if !strings.Contains(string(df), "@"+digest1) {
		t.Errorf("the Dockerfile does not build FROM the locked base %s:\n%s", digest1, df)
	}

	// Move the base: the lock is now stale; init --lock relocks it.
	os.WriteFile(polPath, []byte(strings.Replace(pol, "base:one", "base:two", 1)), 0o644)
	out = initLock()
	df, _ = os.ReadFile(filepath.Join(root, devcontainer.DockerfileFile))
	if !strings.Contains(string(df), "@"+digest2) {
		t.Errorf("after moving the base, the Dockerfile does not use %s:\n%s\n%s", digest2, out, df)
	}

	// Without --lock, init never touches the network: a new repository
	// gets its Dockerfile pending, with the command to run.
	fresh := t.TempDir()
	var buf bytes.Buffer
	app := newApp()
	app.Writer = &buf
	if err := app.Run([]string{"devbox", "init", "--binary", os.Args[0], "--platform", plat, fresh}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "pending") || !strings.Contains(buf.String(), "devbox lock") {
		t.Errorf("init without --lock and without a lock should leave the Dockerfile pending:\n%s", buf.String())
	}
}
