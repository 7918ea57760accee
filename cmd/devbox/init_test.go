package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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
