package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// hashTree hashes every file under root (path, type, mode, content or link
// target), .git included: two equal hashes mean byte-identical trees.
func hashTree(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			line += " " + hex.EncodeToString(sum[:])
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}

// TestGitIsolated: `devbox init --isolated`. The container works on a clone
// in a volume: the remote user commits and plants the same things as in
// TestGitPersistence (hooks, core.fsmonitor, a nested repository) plus a
// write to the read-only checkout; the host checkout, .git included, is
// byte-identical afterwards; `devbox pull` brings the commit back as
// refs/remotes/devbox/main, and nothing planted runs on the host.
func TestGitIsolated(t *testing.T) {
	e := setup(t)
	w := startWorld(t, e.d, e.base, e.worldd)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	marker := filepath.Join(t.TempDir(), "planted-ran")
	plant := "#!/bin/sh\ntouch " + marker + "\n"

	repo := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(filepath.Join(repo, ".devcontainer"), 0o755)
	hostEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	git := func(args ...string) string {
		t.Helper()
		return run(t, repo, hostEnv, "git", append([]string{"-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@x.test", "-c", "init.defaultBranch=main"}, args...)...)
	}
	git("init", "-q")
	// The clone runs git inside the container (a default tool of the image).
	// The sandbox on, so that `devbox run` works in the clone (init adds
	// devbox's seccomp profile to runArgs, as in sandboxRepo).
	pol := strings.Replace(policyFor(e, w, e.registry+"/devbox/e2e:unused"), `"agent":`, `"sandbox": {"enabled": true},
  "agent":`, 1)
	os.WriteFile(filepath.Join(repo, ".devcontainer/devbox.policy.jsonc"), []byte(pol), 0o644)
	os.WriteFile(filepath.Join(repo, "README"), []byte("host\n"), 0o644)
	git("add", ".")
	git("commit", "-qm", "host")
	run(t, repo, nil, e.devbox, "lock", ".devcontainer/devbox.policy.jsonc")
	run(t, repo, nil, e.devbox, "init", "--isolated")
	patchConfig(t, filepath.Join(repo, ".devcontainer/devcontainer.json"), w, true)
	// Once more, so the start's own `devbox init` has nothing to change:
	// the hash below then covers everything but what the host itself did.
	run(t, repo, nil, e.devbox, "init", "--isolated")
	run(t, repo, nil, "chown", "-R", "1000:1000", ".")
	before := hashTree(t, repo)

	_, _, dexec, ws := upFenced(t, e, repo)
	sh := func(script string) (string, error) {
		out, err := dexec("sh", "-c", script).CombinedOutput()
		return string(out), err
	}
	out, err := sh("cd " + ws + " && git log --format=%s && git config --list --local && ls -A .git/hooks 2>/dev/null | wc -l")
	if err != nil || !strings.Contains(out, "host") {
		t.Fatalf("the workspace is not a clone of the checkout: %v\n%s", err, out)
	}
	if strings.Contains(out, "hookspath") || !strings.HasSuffix(strings.TrimSpace(out), "0") {
		t.Errorf("the clone carries hooks or config it should not:\n%s", out)
	}
	// Work, and the plants: in the volume they are the agent's own business.
	script := "set -e; cd " + ws + " && echo inside > work.txt && git add work.txt && " +
		"git -c user.name=agent -c user.email=agent@x.test commit -qm inside && git rev-parse HEAD && " +
		"mkdir -p .git/hooks && printf '" + plant + "' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && " +
		"git config core.fsmonitor 'touch " + marker + "' && " +
		"mkdir -p vendor/x && git -C vendor/x init -q && git -C vendor/x config core.fsmonitor 'touch " + marker + "'"
	out, err = sh(script)
	if err != nil {
		t.Fatalf("working in the clone: %v\n%s", err, out)
	}
	inside := strings.TrimSpace(strings.Split(strings.TrimSpace(out), "\n")[0])
	// The checkout itself is read-only in the container.
	if out, err := sh("printf '" + plant + "' > /mnt/devbox-origin/.git/hooks/post-checkout"); err == nil || !strings.Contains(out, "Read-only file system") {
		t.Errorf("writing the host checkout from the container was not refused (%v): %s", err, out)
	}
	if out, err := dexec("devbox", "doctor", "--workspace", ws).CombinedOutput(); !strings.Contains(string(out), "workspace mode: isolated") {
		t.Errorf("doctor does not say the mode (%v):\n%s", err, out)
	}
	// devbox run in the clone: its run-end audit reports a plant.
	if out, err := sh("cd " + ws + " && devbox run -- sh -c 'mkdir -p deep && echo evil > deep/.envrc'"); err == nil ||
		!regexp.MustCompile(`AUDIT: new +runlater +deep/\.envrc `).MatchString(out) {
		t.Errorf("devbox run in the isolated workspace: %v, want a failure and the audit line for deep/.envrc:\n%s", err, out)
	}

	if after := hashTree(t, repo); after != before {
		t.Fatalf("the host checkout changed while the container worked (tree hash %s → %s)", before, after)
	}

	// devbox pull: objects and refs only.
	// (The checkout belongs to uid 1000 and the test runs as root: git's
	// ownership check wants safe.directory, given as command-line config.)
	pulled := run(t, repo, []string{"DOCKER_HOST=" + e.d.Host, "DEVBOX_DOCKER_PATH=" + e.d.Path,
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"}, e.devbox, "pull")
	t.Logf("devbox pull:\n%s", pulled)
	if got := strings.TrimSpace(git("rev-parse", "refs/remotes/devbox/main")); got != inside {
		t.Errorf("refs/remotes/devbox/main = %s, want the commit made inside %s", got, inside)
	}
	git("status")
	git("log", "-1", "refs/remotes/devbox/main")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("something planted in the container ran on the host")
	}
	if out := run(t, repo, nil, e.devbox, "audit"); !strings.Contains(out, "nothing new") {
		t.Errorf("audit after pull: %s", out)
	}
}
