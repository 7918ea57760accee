package devcontainer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMountsBlock: init's mounts live in one marked block. A devcontainer.json
// from before the block (init's mounts one by one among the user's) is
// migrated; the block follows the git directories that exist (a nested
// repository and a submodule appear, then one goes away); the user's
// mounts and comments outside it keep their bytes; a second run changes
// nothing.
func TestMountsBlock(t *testing.T) {
	root := t.TempDir()
	opts := buildOpts(t, root)
	gitDir(t, root)
	legacy := `{
  // my container
  "mounts": [
    "source=/cache,target=/cache,type=bind", // my cache
    "source=${localWorkspaceFolder}/.devcontainer,target=${containerWorkspaceFolder}/.devcontainer,type=bind,readonly",
    "source=${localWorkspaceFolder}/.git/hooks,target=${containerWorkspaceFolder}/.git/hooks,type=bind,readonly",
    /* keep me */ "source=/x,target=/x,type=bind"
  ]
}
`
	write(t, root, ConfigFile, legacy)
	mustInit(t, opts)
	got := string(read(t, root, ConfigFile))
	for _, s := range []string{"// my container", `"source=/cache,target=/cache,type=bind", // my cache`, `/* keep me */ "source=/x,target=/x,type=bind"`, BlockBegin, BlockEnd} {
		if !strings.Contains(got, s) {
			t.Errorf("lost %q:\n%s", s, got)
		}
	}
	if strings.Count(got, ".git/hooks,type=bind,readonly") != 1 || strings.Count(got, "/.devcontainer,type=bind,readonly") != 1 {
		t.Errorf("init's legacy mounts not moved into the block:\n%s", got)
	}
	block := got[strings.Index(got, BlockBegin):strings.Index(got, BlockEnd)]
	for _, rel := range []string{".devcontainer", ".git/hooks", ".git/config"} {
		if !strings.Contains(block, roMount(rel)) {
			t.Errorf("block lacks %s:\n%s", rel, block)
		}
	}

	// A nested repository and a submodule appear.
	for _, gd := range []string{"vendor/x/.git", ".git/modules/lib"} {
		for _, d := range []string{"hooks", "objects", "refs"} {
			os.MkdirAll(filepath.Join(root, gd, d), 0o755)
		}
		write(t, root, gd+"/HEAD", "ref: refs/heads/main\n")
		write(t, root, gd+"/config", "[core]\n")
	}
	rs := mustInit(t, opts)
	if st := statuses(rs); st[ConfigFile] != Patched {
		t.Errorf("new git dirs: %v", st)
	}
	got = string(read(t, root, ConfigFile))
	for _, rel := range []string{"vendor/x/.git/hooks", "vendor/x/.git/config", ".git/modules/lib/hooks", ".git/modules/lib/config"} {
		if !strings.Contains(got, roMount(rel)) {
			t.Errorf("no read-only mount of %s:\n%s", rel, got)
		}
	}
	again, err := Init(opts)
	if err != nil || statuses(again)[ConfigFile] != Unchanged {
		t.Errorf("second run: %v %v", statuses(again), err)
	}

	// The nested repository goes away: its mounts go too (a bind of a
	// missing path would fail the start), the user's stay.
	os.RemoveAll(filepath.Join(root, "vendor"))
	mustInit(t, opts)
	got = string(read(t, root, ConfigFile))
	if strings.Contains(got, "vendor/x") || !strings.Contains(got, ".git/modules/lib/hooks") || !strings.Contains(got, "// my cache") || !strings.Contains(got, "/* keep me */") {
		t.Errorf("after removing vendor/x:\n%s", got)
	}
}

// TestMountsRunLater: the files and directories other tools on the host
// run or obey (editor and agent settings, .envrc, hook managers) that
// exist when init runs are read-only mounts in the block, like the git
// paths; one that goes away loses its mount (a bind of a missing path
// fails the start); the root's .devcontainer is mounted once.
func TestMountsRunLater(t *testing.T) {
	root := t.TempDir()
	opts := buildOpts(t, root)
	gitDir(t, root)
	for _, f := range []string{".vscode/settings.json", ".vscode/tasks.json", ".claude/settings.json", ".mcp.json", ".envrc", "pkg/.envrc"} {
		write(t, root, f, "{}\n")
	}
	mustInit(t, opts)
	got := string(read(t, root, ConfigFile))
	block := got[strings.Index(got, BlockBegin):strings.Index(got, BlockEnd)]
	for _, rel := range []string{".vscode", ".claude", ".mcp.json", ".envrc", "pkg/.envrc", ".git/hooks", ".git/config"} {
		if !strings.Contains(block, roMount(rel)+`"`) {
			t.Errorf("block lacks a read-only mount of %s:\n%s", rel, block)
		}
	}
	if n := strings.Count(block, "/.devcontainer,"); n != 2 { // source and target of one mount
		t.Errorf(".devcontainer mounted %d/2 times:\n%s", n, block)
	}
	os.Remove(filepath.Join(root, ".envrc"))
	mustInit(t, opts)
	got = string(read(t, root, ConfigFile))
	if strings.Contains(got, roMount(".envrc")+`"`) || !strings.Contains(got, roMount("pkg/.envrc")) {
		t.Errorf("after removing .envrc:\n%s", got)
	}
}

// TestInitIsolated: --isolated moves the workspace to a volume cloned from
// a read-only bind of the checkout (no git path mounted one by one), the
// start command passes --isolated on, and going back to the default mode
// removes init's isolated keys and restores the read-only git mounts.
func TestInitIsolated(t *testing.T) {
	root := t.TempDir()
	opts := buildOpts(t, root)
	gitDir(t, root)
	opts.Isolated = true
	rs := mustInit(t, opts)
	got := string(read(t, root, ConfigFile))
	for _, s := range []string{
		`"workspaceMount": "source=${localWorkspaceFolder},target=/mnt/devbox-origin,type=bind,readonly"`,
		`"source=devbox-workspace-${devcontainerId},target=/workspaces/${localWorkspaceFolderBasename},type=volume"`,
		`"workspaceFolder": "/workspaces/${localWorkspaceFolderBasename}"`,
		`"DEVBOX_ISOLATED_WORKSPACE": "/workspaces/${localWorkspaceFolderBasename}"`,
		`--no-local --template= /mnt/devbox-origin`,
		`devbox audit && devbox init --lock --isolated;`,
	} {
		if !strings.Contains(got, s) {
			t.Errorf("isolated devcontainer.json lacks %s:\n%s", s, got)
		}
	}
	if strings.Contains(got, ".git/hooks") {
		t.Errorf("isolated mode mounts git paths one by one:\n%s", got)
	}
	if st := statuses(rs); st[ConfigFile] != Created {
		t.Errorf("isolated init: %v", st)
	}
	if again, err := Init(opts); err != nil || statuses(again)[ConfigFile] != Unchanged {
		t.Errorf("second isolated run: %v %v", statuses(again), err)
	}

	opts.Isolated = false
	mustInit(t, opts)
	got = string(read(t, root, ConfigFile))
	for _, s := range []string{"workspaceMount", "workspaceFolder", "onCreateCommand", "DEVBOX_ISOLATED_WORKSPACE", "/mnt/devbox-origin", "--isolated"} {
		if strings.Contains(got, s) {
			t.Errorf("back in the default mode, %s is still there:\n%s", s, got)
		}
	}
	if !strings.Contains(got, roMount(".git/hooks")) {
		t.Errorf("back in the default mode, .git/hooks is not read-only:\n%s", got)
	}
}

// gitDir makes root a repository with the git directories init mounts.
func gitDir(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{".git/hooks", ".git/objects", ".git/refs"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, root, ".git/HEAD", "ref: refs/heads/main\n")
	write(t, root, ".git/config", "[core]\n")
}
