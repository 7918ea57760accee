package devcontainer

import (
	"bytes"
	"encoding/json"
	"github.com/tailscale/hujson"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/policy"
)

// fakeBinary writes a file that passes init's ELF check for linux/amd64
// (an ELF64 little-endian header with e_machine EM_X86_64), standing in for
// a Linux devbox build.
func fakeBinary(t *testing.T) string {
	t.Helper()
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01")
	hdr[18] = 62
	p := filepath.Join(t.TempDir(), "devbox")
	if err := os.WriteFile(p, append(hdr, "fake devbox for tests\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

const testLock = `{
  "lockVersion": 1,
  "devbox": "0.1.0-test",
  "sourceDateEpoch": 1767225600,
  "base": {"ref": "docker.io/library/debian:bookworm-slim", "digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111"},
  "claudeCode": {"version": "2.1.332", "platforms": {"linux/amd64": {
    "package": "@anthropic-ai/claude-code-linux-x64",
    "tarball": "https://registry.npmjs.org/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.1.332.tgz",
    "integrity": "sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw=="}}},
  "unpinned": []
}
`

func buildOpts(t *testing.T, root string) InitOptions {
	// The error test where .devcontainer is a file gets no lock.
	if fi, err := os.Stat(filepath.Join(root, Dir)); err != nil || fi.IsDir() {
		// The lock pins the base init will choose for this repository.
		write(t, root, LockFile, strings.Replace(testLock, "docker.io/library/debian:bookworm-slim", DetectBase(root).Ref, 1))
	}
	return InitOptions{Root: root, Binary: fakeBinary(t), Platform: "linux/amd64", Version: "0.1.0-test"}
}

// repoWith makes a repository root holding files (slash path → content).
func repoWith(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, d := range files {
		write(t, root, p, d)
	}
	return root
}

// initFresh runs init once in a new repository and returns its root and
// the options used.
func initFresh(t *testing.T) (string, InitOptions) {
	t.Helper()
	root := t.TempDir()
	opts := buildOpts(t, root)
	mustInit(t, opts)
	return root, opts
}

// mustInit runs init and fails the test on an error.
func mustInit(t *testing.T, opts InitOptions) []FileResult {
	t.Helper()
	rs, err := Init(opts)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func read(t *testing.T, root, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, root, rel, data string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot returns every file under root/.devcontainer with its bytes.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(filepath.Join(root, Dir), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

func statuses(rs []FileResult) map[string]Status {
	m := map[string]Status{}
	for _, r := range rs {
		m[r.Path] = r.Status
	}
	return m
}

func TestInitFreshGolden(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string // repository files before init
		image string
	}{
		{name: "empty"},
		{name: "node-go-git", files: map[string]string{
			"package.json":     "{}",
			"go.mod":           "module x\n",
			".git/config":      "[remote \"origin\"]\n\turl = https://github.com/example/x\n",
			".git/hooks/.keep": "",
		}},
		{name: "image", image: "registry.test/team/devbox@sha256:" + strings.Repeat("ab", 32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := repoWith(t, tt.files)
			opts := buildOpts(t, root)
			opts.Image = tt.image
			rs := mustInit(t, opts)
			for _, r := range rs {
				if r.Status != Created {
					t.Errorf("%s: status %s, want created", r.Path, r.Status)
				}
			}
			golden.Check(t, filepath.Join("testdata", tt.name+".devcontainer.json"), read(t, root, ConfigFile))
			golden.Check(t, filepath.Join("testdata", tt.name+".policy.jsonc"), read(t, root, PolicyFile))
			if tt.image == "" {
				golden.Check(t, filepath.Join("testdata", tt.name+".Dockerfile"), read(t, root, DockerfileFile))
				if got := read(t, root, BinaryFile); !bytes.HasPrefix(got, []byte("\x7fELF")) {
					t.Errorf("binary not copied: %q", got)
				}
				fi, err := os.Stat(filepath.Join(root, BinaryFile))
				if err != nil || fi.Mode().Perm()&0o111 == 0 {
					t.Errorf("binary is not executable: %v %v", fi.Mode(), err)
				}
			} else if _, err := os.Stat(filepath.Join(root, DockerfileFile)); !os.IsNotExist(err) {
				t.Errorf("image mode wrote a Dockerfile (err=%v)", err)
			}
			// A fresh devcontainer.json is JSON but for the two comments
			// around init's block.
			std, err := hujson.Standardize(read(t, root, ConfigFile))
			if err != nil || !json.Valid(std) || strings.Count(string(read(t, root, ConfigFile)), "//") != 2 {
				t.Errorf("devcontainer.json is not JSON with init's two comments (%v)", err)
			}
		})
	}
}

func TestInitIdempotent(t *testing.T) {
	for _, image := range []string{"", "registry.test/x@sha256:" + strings.Repeat("0", 64)} {
		root := t.TempDir()
		write(t, root, "pyproject.toml", "")
		opts := buildOpts(t, root)
		opts.Image = image
		mustInit(t, opts)
		before := snapshot(t, root)
		rs := mustInit(t, opts)
		for _, r := range rs {
			if r.Status != Unchanged {
				t.Errorf("image=%q second run: %s is %s, want unchanged", image, r.Path, r.Status)
			}
		}
		after := snapshot(t, root)
		if len(before) == 0 || !maps.Equal(before, after) {
			t.Errorf("image=%q: second run changed files", image)
		}
	}
}

func TestInitKeepsPatchesAndForces(t *testing.T) {
	root, opts := initFresh(t)
	fresh := snapshot(t, root)

	// The user edits the policy: init keeps it and regenerates its own
	// Dockerfile from it.
	userPolicy := strings.Replace(fresh[PolicyFile], `"packages": []`, `"packages": ["jq"]`, 1)
	if userPolicy == fresh[PolicyFile] {
		t.Fatal("test setup: packages key not found in the template")
	}
	write(t, root, PolicyFile, userPolicy)
	rs := mustInit(t, opts)
	st := statuses(rs)
	if st[PolicyFile] != Kept || st[DockerfileFile] != Updated || st[ConfigFile] != Unchanged {
		t.Errorf("after a policy edit: %v", st)
	}
	if got := string(read(t, root, PolicyFile)); got != userPolicy {
		t.Errorf("policy was not kept")
	}
	if !strings.Contains(string(read(t, root, DockerfileFile)), " jq") {
		t.Errorf("Dockerfile does not follow the edited policy:\n%s", read(t, root, DockerfileFile))
	}

	// A Dockerfile that init did not write is refused, and nothing is
	// written at all, not even the files before it.
	write(t, root, DockerfileFile, "FROM scratch\n")
	write(t, root, ConfigFile, "{}\n")
	before := snapshot(t, root)
	_, err := Init(opts)
	if err == nil || !strings.Contains(err.Error(), "Dockerfile exists and was not written by devbox init") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("want a refusal naming the Dockerfile and --force, got %v", err)
	}
	if !maps.Equal(before, snapshot(t, root)) {
		t.Errorf("a refused init changed files")
	}

	// --force: everything back to fresh.
	opts.Force = true
	rs = mustInit(t, opts)
	st = statuses(rs)
	for _, p := range []string{PolicyFile, ConfigFile, DockerfileFile} {
		if st[p] != Overwritten {
			t.Errorf("--force: %s is %s, want overwritten", p, st[p])
		}
	}
	if !maps.Equal(fresh, snapshot(t, root)) {
		t.Errorf("--force did not restore the fresh files")
	}
}

func TestPatchCommentedGolden(t *testing.T) {
	src, err := os.ReadFile("testdata/commented.jsonc")
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"build", "image"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			write(t, root, ConfigFile, string(src))
			write(t, root, ".git/config", "[core]\n")
			write(t, root, ".git/hooks/pre-commit.sample", "")
			opts := buildOpts(t, root)
			if mode == "image" {
				opts.Image = "registry.test/team/devbox@sha256:" + strings.Repeat("cd", 32)
			}
			rs := mustInit(t, opts)
			var report bytes.Buffer
			for _, r := range rs {
				report.WriteString(r.String() + "\n")
			}
			got := read(t, root, ConfigFile)
			golden.Check(t, filepath.Join("testdata", "commented."+mode+".golden"), got)
			golden.Check(t, filepath.Join("testdata", "commented."+mode+".changes"), report.Bytes())
			// Every comment of the user's file is still there.
			for _, c := range []string{"// My team's dev container. Keep this comment.", "// The name VS Code shows.", "// trailing comment", "/* Extra capabilities we needed for a debugger. */", "// keep vim", "// Go support"} {
				if !bytes.Contains(got, []byte(c)) {
					t.Errorf("comment %q lost", c)
				}
			}
			// Patching the patched file changes nothing.
			again, changes, err := patchJSONC("again", got, configRules(mustPolicy(t, root), hostLayout{image: opts.Image, readOnly: []string{".git/config", ".git/hooks"}}))
			if err != nil || len(changes) != 0 || !bytes.Equal(again, got) {
				t.Errorf("second patch: changes %v, err %v", changes, err)
			}
		})
	}
}

func mustPolicy(t *testing.T, root string) *policy.Policy {
	t.Helper()
	p, err := policy.Load(filepath.Join(root, PolicyFile))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDetectPresets(t *testing.T) {
	tests := []struct {
		files map[string]string
		want  []string
	}{
		{nil, []string{"anthropic", "claude-login", "vscode"}},
		{map[string]string{"package.json": "{}"}, []string{"anthropic", "claude-login", "vscode", "npm"}},
		{map[string]string{"go.mod": ""}, []string{"anthropic", "claude-login", "vscode", "go"}},
		{map[string]string{"requirements.txt": ""}, []string{"anthropic", "claude-login", "vscode", "pypi"}},
		{map[string]string{"pyproject.toml": "", "setup.py": ""}, []string{"anthropic", "claude-login", "vscode", "pypi"}},
		{map[string]string{"sub/package.json": "{}"}, []string{"anthropic", "claude-login", "vscode"}},
		{map[string]string{".git/config": "url = git@github.com:a/b"}, []string{"anthropic", "claude-login", "vscode", "github"}},
		{map[string]string{".git/config": "url = https://gitlab.test/a/b"}, []string{"anthropic", "claude-login", "vscode"}},
		{map[string]string{"package.json/x": ""}, []string{"anthropic", "claude-login", "vscode"}}, // a directory, not a file
	}
	for _, tt := range tests {
		root := repoWith(t, tt.files)
		var got []string
		for _, p := range DetectPresets(root) {
			got = append(got, p.Name)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("files %v: presets %v, want %v", tt.files, got, tt.want)
		}
	}
}

func TestInitErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		opts  func(*InitOptions)
		want  string
	}{
		{name: "devcontainer is a file", files: map[string]string{".devcontainer": "x"}, want: ".devcontainer exists and is not a directory"},
		{name: "syntax error", files: map[string]string{ConfigFile: "{\n  \"name\": \"x\",\n  \"image\" \"y\"\n}\n"}, want: "devcontainer.json:3:11: syntax error"},
		{name: "not an object", files: map[string]string{ConfigFile: "[]"}, want: "devcontainer.json: the top-level value must be an object"},
		{name: "capAdd not an array", files: map[string]string{ConfigFile: `{"capAdd": "NET_ADMIN"}`}, want: `devcontainer.json: capAdd: is "NET_ADMIN", want an array`},
		{name: "compose", files: map[string]string{ConfigFile: `{"dockerComposeFile": "compose.yml", "service": "app"}`}, want: "uses dockerComposeFile"},
		{name: "bad policy", files: map[string]string{PolicyFile: "{\"network\": {\"allow\": [\"*.com\"]}}"}, want: "devbox.policy.jsonc:1"},
		{name: "image by tag", opts: func(o *InitOptions) { o.Image = "registry.test/x:latest" }, want: "must be an image reference pinned by digest"},
		{name: "binary not ELF", opts: func(o *InitOptions) { o.Binary = writeTemp(t, "#!/bin/sh\n") }, want: "not a Linux executable"},
		{name: "binary wrong arch", opts: func(o *InitOptions) { o.Platform = "linux/arm64" }, want: "not built for linux/arm64"},
		{name: "bad lock", opts: func(o *InitOptions) { write(t, o.Root, LockFile, "{}") }, want: "devbox.lock.json"},
		{name: "binary missing", opts: func(o *InitOptions) { o.Binary = "/nonexistent/devbox" }, want: "--binary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := repoWith(t, tt.files)
			opts := buildOpts(t, root)
			if tt.opts != nil {
				tt.opts(&opts)
			}
			before := snapshot(t, root)
			_, err := Init(opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if !maps.Equal(before, snapshot(t, root)) {
				t.Errorf("a failed init changed files")
			}
		})
	}
}

func writeTemp(t *testing.T, data string) string {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInitModeSwitch: build → image → build converges; init's own
// initializeCommand follows the mode (the audit runs in both), a user's
// stays.
func TestInitModeSwitch(t *testing.T) {
	root, opts := initFresh(t)
	build := string(read(t, root, ConfigFile))
	opts.Image = "registry.test/x@sha256:" + strings.Repeat("1", 64)
	rs := mustInit(t, opts)
	cfg := string(read(t, root, ConfigFile))
	if !strings.Contains(cfg, "devbox audit && devbox init --image "+opts.Image+";") || strings.Contains(cfg, `"build"`) || !strings.Contains(cfg, opts.Image) {
		t.Errorf("image mode config:\n%s", cfg)
	}
	if st := statuses(rs); st[ConfigFile] != Patched {
		t.Errorf("switch to image: %v", st)
	}
	opts.Image = ""
	mustInit(t, opts)
	if got := string(read(t, root, ConfigFile)); strings.Contains(got, `"image"`) || !strings.Contains(got, "devbox audit && devbox init --lock;") {
		t.Errorf("back to build mode:\n%s\nfirst build-mode file was:\n%s", got, build)
	}

	// A user's own initializeCommand survives image mode.
	root = t.TempDir()
	write(t, root, ConfigFile, `{"initializeCommand": "make prepare"}`)
	opts = buildOpts(t, root)
	opts.Image = "registry.test/x@sha256:" + strings.Repeat("2", 64)
	mustInit(t, opts)
	if !strings.Contains(string(read(t, root, ConfigFile)), "make prepare") {
		t.Errorf("the user's initializeCommand was removed")
	}
}

// TestInitWithoutLock: the build files wait for `devbox lock`; the rest is
// written, and init says what to run.
func TestInitWithoutLock(t *testing.T) {
	root := t.TempDir()
	opts := buildOpts(t, root)
	if err := os.Remove(filepath.Join(root, LockFile)); err != nil {
		t.Fatal(err)
	}
	rs := mustInit(t, opts)
	st := statuses(rs)
	if st[PolicyFile] != Created || st[ConfigFile] != Created || st[DockerfileFile] != Pending {
		t.Errorf("statuses %v", st)
	}
	for _, r := range rs {
		if r.Status == Pending && !strings.Contains(r.String(), "devbox lock .devcontainer/devbox.policy.jsonc") {
			t.Errorf("pending note does not say what to run: %s", r)
		}
	}
	if _, err := os.Stat(filepath.Join(root, DockerfileFile)); !os.IsNotExist(err) {
		t.Errorf("Dockerfile written without a lock (err=%v)", err)
	}
	// Once locked, init completes the build files.
	write(t, root, LockFile, strings.Replace(testLock, "docker.io/library/debian:bookworm-slim", policy.DefaultBase, 1))
	rs = mustInit(t, opts)
	if st := statuses(rs); st[DockerfileFile] != Created || st[BinaryFile] != Created || st[ContextPolicyFile] != Created || st[PolicyFile] != Unchanged {
		t.Errorf("after devbox lock: %v", st)
	}
}

func TestNextStep(t *testing.T) {
	have := func(names ...string) func(string) (string, error) {
		return func(n string) (string, error) {
			if slices.Contains(names, n) {
				return "/usr/bin/" + n, nil
			}
			return "", os.ErrNotExist
		}
	}
	done := []FileResult{{Path: ConfigFile, Status: Created}}
	if got := NextStep(".", "docker", []FileResult{{Path: DockerfileFile, Status: Pending}}, have("docker")); got != nil {
		t.Errorf("with a pending file: %q, want nothing (the note says what to run)", got)
	}
	if got := NextStep(".", "docker", []FileResult{{Path: ConfigFile, Status: Unchanged}}, have()); got != nil {
		t.Errorf("nothing changed (the initializeCommand's run): %q, want nothing", got)
	}
	if got := NextStep(".", "docker", done, have("docker")); len(got) != 1 || !strings.Contains(got[0], "devcontainer up --workspace-folder .") {
		t.Errorf("docker present: %q", got)
	}
	if got := NextStep(".", "docker", done, have("podman")); len(got) != 2 || !strings.Contains(got[1], "--docker-path podman") {
		t.Errorf("podman only: %q", got)
	}
	if got := NextStep("/some/repo", "docker", done, have()); len(got) != 2 || !strings.Contains(got[0], "/some/repo") || !strings.Contains(got[1], "install Docker Engine") {
		t.Errorf("no engine: %q", got)
	}
}

// TestInitEnginePodmanRootful: --engine podman-rootful adds the one runArg
// rootful Podman needs; an init without --engine (the initializeCommand's)
// keeps it; docker and rootless podman write the same file; a bad engine
// is an error naming the flag.
func TestInitEnginePodmanRootful(t *testing.T) {
	runArgs := func(root string) []string {
		std, err := hujson.Standardize(read(t, root, ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct{ RunArgs []string }
		if err := json.Unmarshal(std, &cfg); err != nil {
			t.Fatal(err)
		}
		return cfg.RunArgs
	}
	docker, podman := t.TempDir(), t.TempDir()
	for root, engine := range map[string]string{docker: "docker", podman: "podman"} {
		opts := buildOpts(t, root)
		opts.Engine = engine
		mustInit(t, opts)
	}
	if !bytes.Equal(read(t, docker, ConfigFile), read(t, podman, ConfigFile)) || slices.Contains(runArgs(podman), PodmanRootfulRunArg) {
		t.Errorf("rootless podman's devcontainer.json differs from docker's, or has %s: %q", PodmanRootfulRunArg, runArgs(podman))
	}

	root := t.TempDir()
	opts := buildOpts(t, root)
	opts.Engine = "podman-rootful"
	mustInit(t, opts)
	if got := runArgs(root); !slices.Contains(got, PodmanRootfulRunArg) {
		t.Fatalf("--engine podman-rootful: runArgs %q lack %s", got, PodmanRootfulRunArg)
	}
	opts.Engine = ""
	rs := mustInit(t, opts)
	if st := statuses(rs)[ConfigFile]; st != Unchanged || !slices.Contains(runArgs(root), PodmanRootfulRunArg) {
		t.Errorf("init without --engine after podman-rootful: %s, runArgs %q; want it unchanged", st, runArgs(root))
	}

	opts.Engine = "lxc"
	if _, err := Init(opts); err == nil || !strings.Contains(err.Error(), `--engine "lxc"`) {
		t.Errorf("--engine lxc: %v, want an error naming the flag", err)
	}
}

func TestNextStepPodman(t *testing.T) {
	done := []FileResult{{Path: ConfigFile, Status: Created}}
	podmanOnly := func(n string) (string, error) {
		if n == "podman" {
			return "/usr/bin/podman", nil
		}
		return "", os.ErrNotExist
	}
	for _, engine := range []string{"podman", "podman-rootful"} {
		if got := NextStep(".", engine, done, podmanOnly); len(got) != 1 || !strings.Contains(got[0], "devcontainer up --docker-path podman --workspace-folder .") {
			t.Errorf("engine %s: %q", engine, got)
		}
	}
	if got := NextStep(".", "docker", done, podmanOnly); len(got) != 2 || !strings.Contains(got[1], "--engine podman-rootful") {
		t.Errorf("engine docker, podman only: %q", got)
	}
}
