package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitPersistence: the two chains of issue 14 and their cousins, in the
// default (bind) mode, through `devcontainer up` in a repository with a
// submodule, a nested repository and a worktree. As the remote user the
// test plants, each with a command that would create a marker file on the
// host: a submodule hook and a nested core.fsmonitor (existing paths: the
// write must be refused), a worktree's config.worktree and a new nested
// repository (new paths: the next start must fail with the audit naming
// each). The same for the files other tools on the host run: the
// repository's .vscode/settings.json and .envrc exist (refused), Claude
// Code's .claude/settings.json and .mcp.json do not (reported). Then, as
// the host's user, it runs the chains' git commands and checks the marker
// was never created; after `devbox audit --accept` the start goes through.
func TestGitPersistence(t *testing.T) {
	e := setup(t)
	w := startWorld(t, e.d, e.base, e.worldd)
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the audit's accepted states
	marker := filepath.Join(t.TempDir(), "planted-ran")
	plant := "#!/bin/sh\ntouch " + marker + "\n"

	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	lib := filepath.Join(base, "libsrc")
	git := func(dir string, args ...string) string {
		t.Helper()
		return run(t, dir, []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}, "git",
			append([]string{"-c", "protocol.file.allow=always", "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@x.test", "-c", "init.defaultBranch=main"}, args...)...)
	}
	for _, d := range []string{repo, lib, filepath.Join(repo, "vendor/x"), filepath.Join(repo, ".devcontainer")} {
		os.MkdirAll(d, 0o755)
	}
	git(lib, "init", "-q")
	os.WriteFile(filepath.Join(lib, "lib.txt"), []byte("lib\n"), 0o644)
	git(lib, "add", ".")
	git(lib, "commit", "-qm", "lib")
	git(repo, "init", "-q")
	git(repo, "submodule", "-q", "add", lib, "lib")
	os.WriteFile(filepath.Join(repo, ".devcontainer/devbox.policy.jsonc"), []byte(policyFor(e, w, e.registry+"/devbox/e2e:unused")), 0o644)
	git(repo, "add", ".")
	git(repo, "commit", "-qm", "root")
	git(repo, "worktree", "add", "-q", "wt")
	git(filepath.Join(repo, "vendor/x"), "init", "-q")
	os.MkdirAll(filepath.Join(repo, ".vscode"), 0o755)
	os.WriteFile(filepath.Join(repo, ".vscode/settings.json"), []byte("{}\n"), 0o644)
	os.WriteFile(filepath.Join(repo, ".envrc"), []byte("export A=1\n"), 0o644)

	run(t, repo, nil, e.devbox, "lock", ".devcontainer/devbox.policy.jsonc")
	out := run(t, repo, nil, e.devbox, "init")
	if !strings.Contains(out, "recorded    the git audit's first state") {
		t.Errorf("init did not record the audit's first state:\n%s", out)
	}
	cfg, _ := os.ReadFile(filepath.Join(repo, ".devcontainer/devcontainer.json"))
	for _, rel := range []string{".git/hooks", ".git/config", ".git/modules/lib/hooks", ".git/modules/lib/config", "vendor/x/.git/hooks", "vendor/x/.git/config", ".vscode", ".envrc"} {
		if !strings.Contains(string(cfg), "${localWorkspaceFolder}/"+rel+",") {
			t.Errorf("devcontainer.json does not mount %s read-only:\n%s", rel, cfg)
		}
	}
	patchConfig(t, filepath.Join(repo, ".devcontainer/devcontainer.json"), w, true)
	run(t, repo, nil, e.devbox, "init") // as in sampleRepo
	run(t, repo, nil, "chown", "-R", "1000:1000", ".")

	id, _, dexec, ws := upFenced(t, e, repo)
	sh := func(script string) (string, error) {
		out, err := dexec("sh", "-c", script).CombinedOutput()
		return string(out), err
	}

	// The escape suite's git attempts: every git directory's hooks and
	// config present at creation, beyond the top-level ones.
	// (Only the workspace is given: the network attempts are TestFence's.)
	prepare(t, e, id)
	tableOut, _ := dexec("devbox-escape", "--workspace", ws).CombinedOutput()
	table := string(tableOut)
	if m := summaryRE.FindStringSubmatch(table); m == nil || m[2] != "0" {
		t.Fatalf("escape suite: escapes or no summary:\n%s", table)
	}
	n := everyRow(t, table, "plant a file the host runs", "read-only file system")
	if n < 6 {
		t.Errorf("%d plant attempts in the escape suite, want ≥ 6 (submodule and nested repository hooks and config, .vscode, .envrc)", n)
	}

	// Existing paths: refused.
	for _, attempt := range []struct{ name, script string }{
		{"submodule hook", "printf '" + plant + "' > " + ws + "/.git/modules/lib/hooks/post-checkout && chmod +x " + ws + "/.git/modules/lib/hooks/post-checkout"},
		{"nested core.fsmonitor", "printf '[core]\\n\\tfsmonitor = touch " + marker + "\\n' >> " + ws + "/vendor/x/.git/config"},
		{"top-level hook", "printf '" + plant + "' > " + ws + "/.git/hooks/post-checkout"},
		{"VS Code task", "printf '{\"version\": \"2.0.0\", \"tasks\": [{\"label\": \"x\", \"type\": \"shell\", \"command\": \"touch " + marker + "\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}' > " + ws + "/.vscode/tasks.json"},
		{".envrc", "echo 'touch " + marker + "' >> " + ws + "/.envrc"},
	} {
		out, err := sh(attempt.script)
		if err == nil || !strings.Contains(out, "Read-only file system") {
			t.Errorf("%s: the write was not refused by a read-only mount (err %v): %s", attempt.name, err, out)
		}
	}
	// New paths: written, and caught by the audit at the next start.
	for _, attempt := range []struct{ name, script string }{
		{"worktree config", "printf '[core]\\n\\tfsmonitor = touch " + marker + "\\n' > " + ws + "/.git/worktrees/wt/config.worktree"},
		// Issue 23's classes, where no mount reaches: an exec line in a
		// rebase todo, a commondir whose second line moves it, and a bare
		// repository in a subdirectory whose HEAD is a link.
		{"rebase todo", "mkdir -p " + ws + "/.git/rebase-merge && echo 'exec touch " + marker + "' > " + ws + "/.git/rebase-merge/git-rebase-todo"},
		{"commondir second line", "printf '../..\\nx\\n' > " + ws + "/.git/worktrees/wt/commondir"},
		{"bare repository, linked HEAD", "mkdir -p " + ws + "/store/objects " + ws + "/store/refs/heads && ln -s refs/heads/main " + ws + "/store/HEAD && " +
			"printf '[alias]\\n\\tx = !touch " + marker + "\\n' > " + ws + "/store/config"},
		{"Claude Code hook", "mkdir -p " + ws + "/.claude && printf '{\"hooks\": {\"SessionStart\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"touch " + marker + "\"}]}]}}' > " + ws + "/.claude/settings.json"},
		{"MCP server", "printf '{\"mcpServers\": {\"x\": {\"command\": \"touch\", \"args\": [\"" + marker + "\"]}}}' > " + ws + "/.mcp.json"},
		{"new nested repository", "mkdir -p " + ws + "/newrepo/.git/objects " + ws + "/newrepo/.git/refs " + ws + "/newrepo/.git/hooks && " +
			"echo 'ref: refs/heads/main' > " + ws + "/newrepo/.git/HEAD && " +
			"printf '[core]\\n\\tfsmonitor = touch " + marker + "\\n' > " + ws + "/newrepo/.git/config && " +
			"printf '" + plant + "' > " + ws + "/newrepo/.git/hooks/post-checkout && chmod +x " + ws + "/newrepo/.git/hooks/post-checkout"},
	} {
		if out, err := sh(attempt.script); err != nil {
			t.Fatalf("%s: %v: %s", attempt.name, err, out)
		}
	}
	// Moving the submodule's git directory aside to plant a fresh one:
	// whatever the kernel allows, the audit must see the result.
	moved, _ := sh("mv " + ws + "/.git/modules/lib " + ws + "/.git/modules/lib.old && mkdir -p " + ws + "/.git/modules/lib/hooks && " +
		"printf '" + plant + "' > " + ws + "/.git/modules/lib/hooks/post-checkout && chmod +x " + ws + "/.git/modules/lib/hooks/post-checkout && echo MOVED")
	t.Logf("moving .git/modules/lib aside: %s", moved)

	// The next start fails, and the audit names each new path.
	e.d.Run(t, "stop", "-t", "2", id)
	path := "PATH=" + filepath.Dir(e.devbox) + string(os.PathListSeparator) + os.Getenv("PATH")
	upOut, err := runErr(repo, []string{"DOCKER_HOST=" + e.d.Host, path}, e.dcli, "up", "--workspace-folder", repo, "--docker-path", e.d.Path)
	if err == nil {
		t.Fatalf("the start after planting went through:\n%s", upOut)
	}
	report := err.Error()
	for _, want := range []string{".git/worktrees/wt/config.worktree", "core.fsmonitor", "newrepo/.git", "newrepo/.git/hooks/post-checkout", "devbox audit --accept",
		".git/rebase-merge/git-rebase-todo", ".git/worktrees/wt/commondir", "store/config", "alias.x", "store/HEAD",
		"runlater   .claude/settings.json", "runlater   .mcp.json"} {
		if !strings.Contains(report, want) {
			t.Errorf("the failed start's audit report does not name %q:\n%s", want, tail(report))
		}
	}
	if strings.Contains(moved, "MOVED") && !strings.Contains(report, ".git/modules/lib/hooks/post-checkout") {
		t.Errorf("the submodule's git directory was replaced and the audit missed its hook:\n%s", tail(report))
	}

	// The host step: the chains' commands, as the developer would run
	// them (not in the new repository, which the audit flags for review
	// before any git runs there).
	// Their exit status does not matter (with the submodule's git
	// directory replaced, `submodule update` fails); what they run does.
	hostEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
	for _, c := range []struct {
		dir  string
		args []string
	}{
		{repo, []string{"submodule", "update", "--force"}},
		{repo, []string{"-C", "vendor/x", "status"}},
		{repo, []string{"status"}},
		{filepath.Join(repo, "wt"), []string{"status"}},
	} {
		_, err := runErr(c.dir, hostEnv, "git", append([]string{"-c", "protocol.file.allow=always", "-c", "safe.directory=*"}, c.args...)...)
		t.Logf("host: git %s: %v", strings.Join(c.args, " "), err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("host git ran something planted in the container (marker %s exists)", marker)
	}

	// After review the start goes through. When the submodule's git
	// directory was moved aside, the old container cannot start at all (a
	// read-only mount's source is gone: it fails closed) and is recreated,
	// with the mounts the start's devbox init wrote.
	run(t, repo, nil, e.devbox, "audit", "--accept")
	if strings.Contains(moved, "MOVED") {
		out, err := runErr(repo, []string{"DOCKER_HOST=" + e.d.Host, path}, e.dcli, "up", "--workspace-folder", repo, "--docker-path", e.d.Path)
		if err == nil || !strings.Contains(err.Error(), "bind source path does not exist") {
			t.Errorf("the container whose mount source was moved away started (%v):\n%s", err, tail(out))
		}
		e.d.Run(t, "rm", "-f", id)
	}
	devcontainerUp(t, e, repo)
	cfg, _ = os.ReadFile(filepath.Join(repo, ".devcontainer/devcontainer.json"))
	for _, rel := range []string{"newrepo/.git/config", ".claude", ".mcp.json"} {
		if !strings.Contains(string(cfg), "${localWorkspaceFolder}/"+rel+",") {
			t.Errorf("the start's devbox init did not add the read-only mount of %s:\n%s", rel, cfg)
		}
	}
}
