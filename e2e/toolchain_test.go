package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/devcontainer"
)

// The world's package servers: worldd -files on W1, under these names.
const (
	pkgPort = 8081
	npmHost = "npm.test"
	pypiURL = "http://pypi.test:8081/simple/"
)

// writeNPMRegistry writes a static npm registry with one package,
// devbox-hello 1.0.0, under dir: its package document at /devbox-hello and
// its tarball, and returns the tarball's URL and sha512 integrity (what a
// package-lock.json records).
func writeNPMRegistry(t *testing.T, dir string) (tarball, integrity string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range [][2]string{
		{"package/package.json", `{"name": "devbox-hello", "version": "1.0.0", "main": "index.js"}` + "\n"},
		{"package/index.js", `module.exports = "hello from npm.test";` + "\n"},
	} {
		tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg})
		tw.Write([]byte(f[1]))
	}
	tw.Close()
	gz.Close()
	tgz := buf.Bytes()
	s512 := sha512.Sum512(tgz)
	s1 := sha1.Sum(tgz)
	integrity = "sha512-" + base64.StdEncoding.EncodeToString(s512[:])
	tarball = fmt.Sprintf("http://%s:%d/tarballs/devbox-hello-1.0.0.tgz", npmHost, pkgPort)
	doc, _ := json.Marshal(map[string]any{
		"name":      "devbox-hello",
		"dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": map[string]any{
			"name": "devbox-hello", "version": "1.0.0", "main": "index.js",
			"dist": map[string]string{"tarball": tarball, "integrity": integrity, "shasum": hex.EncodeToString(s1[:])},
		}},
	})
	os.MkdirAll(filepath.Join(dir, "tarballs"), 0o755)
	os.WriteFile(filepath.Join(dir, "tarballs", "devbox-hello-1.0.0.tgz"), tgz, 0o644)
	os.WriteFile(filepath.Join(dir, "devbox-hello"), doc, 0o644)
	return tarball, integrity
}

// writePipIndex writes a pip "simple" index with one wheel,
// devbox_hello 1.0, under dir (/simple/devbox-hello/ and /files/).
func writePipIndex(t *testing.T, dir string) {
	t.Helper()
	const whl = "devbox_hello-1.0-py3-none-any.whl"
	files := [][2]string{
		{"devbox_hello/__init__.py", `MESSAGE = "hello from pypi.test"` + "\n"},
		{"devbox_hello-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: devbox-hello\nVersion: 1.0\n"},
		{"devbox_hello-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: devbox-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString("devbox_hello-1.0.dist-info/RECORD,,\n")
	files = append(files, [2]string{"devbox_hello-1.0.dist-info/RECORD", record.String()})
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, _ := zw.Create(f[0])
		w.Write([]byte(f[1]))
	}
	zw.Close()
	sum := sha256.Sum256(buf.Bytes())
	os.MkdirAll(filepath.Join(dir, "files"), 0o755)
	os.MkdirAll(filepath.Join(dir, "simple", "devbox-hello"), 0o755)
	os.WriteFile(filepath.Join(dir, "files", whl), buf.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "simple", "index.html"),
		[]byte(`<!DOCTYPE html><html><body><a href="devbox-hello/">devbox-hello</a></body></html>`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "simple", "devbox-hello", "index.html"),
		[]byte(fmt.Sprintf(`<!DOCTYPE html><html><body><a href="../../files/%s#sha256=%x">%s</a></body></html>`+"\n", whl, sum, whl)), 0o644)
}

// toolchainRepo makes a repository with files, runs `devbox init` and
// checks the policy's base is detected (the official image, the marker
// file named in the comment), then points image.base at standIn, the test
// registry's stand-in of that image, as the other tests point the default
// base at DEVBOX_BASE_IMAGE; allows the world's hosts; locks; and inits
// again for devcontainer.json and the Dockerfile.
func toolchainRepo(t *testing.T, e env, w *world, files map[string]string, marker, detected, standIn string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(dir, 0o755)
	run(t, dir, nil, "git", "init", "-q", ".")
	for name, body := range files {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	run(t, dir, nil, e.devbox, "init")
	polPath := filepath.Join(dir, ".devcontainer", "devbox.policy.jsonc")
	raw, err := os.ReadFile(polPath)
	if err != nil {
		t.Fatal(err)
	}
	pol := string(raw)
	if !strings.Contains(pol, `"base": "`+detected+`"`) || !strings.Contains(pol, "// "+marker+" found: ") {
		t.Fatalf("devbox init did not pick %s for a repository with %s:\n%s", detected, marker, pol)
	}
	const allow = `"allow": [],`
	if !strings.Contains(pol, allow) {
		t.Fatalf("the init policy changed shape (no %s):\n%s", allow, pol)
	}
	pol = strings.Replace(pol, `"base": "`+detected+`"`, `"base": "`+standIn+`"`, 1)
	pol = strings.Replace(pol, allow, fmt.Sprintf(`"allow": ["allowed.test:8080", "%s:%d", "pypi.test:%d"],`, npmHost, pkgPort, pkgPort), 1)
	os.WriteFile(polPath, []byte(pol), 0o644)
	run(t, dir, nil, e.devbox, "lock", ".devcontainer/devbox.policy.jsonc")
	run(t, dir, nil, e.devbox, "init")
	patchConfig(t, filepath.Join(dir, ".devcontainer/devcontainer.json"), w, true)
	run(t, dir, nil, e.devbox, "init")
	run(t, dir, nil, "chown", "-R", "1000:1000", ".")
	return dir
}

// TestToolchainBases: `devbox init` in a Node and in a Python repository
// picks the official image of the toolchain; on scripts/services' stand-in
// of that image, `devcontainer up` builds the dev container, where the
// remote user commits with git, runs node or python3, installs the
// lockfile's or requirements' package from the world's registry (npm ci,
// pip install) and runs claude --version; then the escape suite finds no
// way out. One container per language.
func TestToolchainBases(t *testing.T) {
	e := setup(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // init's git audit state
	pkgs := t.TempDir()
	tarball, integrity := writeNPMRegistry(t, pkgs)
	writePipIndex(t, pkgs)
	w := startWorldWith(t, e.d, e.base, e.worldd, worldOptions{Files: []worldFiles{{Dir: pkgs, Port: pkgPort, Names: []string{npmHost, "pypi.test"}}}})

	lock, _ := json.MarshalIndent(map[string]any{
		"name": "sample", "version": "1.0.0", "lockfileVersion": 3, "requires": true,
		"packages": map[string]any{
			"":                          map[string]any{"name": "sample", "version": "1.0.0", "dependencies": map[string]string{"devbox-hello": "1.0.0"}},
			"node_modules/devbox-hello": map[string]any{"version": "1.0.0", "resolved": tarball, "integrity": integrity},
		},
	}, "", "  ")
	for _, tc := range []struct {
		name, marker, detected, standInEnv string
		files                              map[string]string
		script                             string
		want                               []string
	}{
		{
			name: "node", marker: "package.json", detected: devcontainer.NodeBase, standInEnv: "DEVBOX_NODE_BASE_IMAGE",
			files: map[string]string{
				"package.json":      `{"name": "sample", "version": "1.0.0", "dependencies": {"devbox-hello": "1.0.0"}}` + "\n",
				"package-lock.json": string(lock) + "\n",
				".npmrc":            fmt.Sprintf("registry=http://%s:%d/\naudit=false\nfund=false\nupdate-notifier=false\n", npmHost, pkgPort),
			},
			script: `node -e 'console.log("node " + process.version)' && npm ci && node -e 'console.log(require("devbox-hello"))'`,
			want:   []string{"node v", "added 1 package", "hello from npm.test"},
		},
		{
			name: "python", marker: "requirements.txt", detected: devcontainer.PythonBase, standInEnv: "DEVBOX_PYTHON_BASE_IMAGE",
			files:  map[string]string{"requirements.txt": "devbox-hello==1.0\n"},
			script: `python3 -c 'import sys; print("python", sys.version.split()[0])' && python3 -m venv ~/venv && ~/venv/bin/pip install --disable-pip-version-check --index-url ` + pypiURL + ` --trusted-host pypi.test -r requirements.txt && ~/venv/bin/python -c 'import devbox_hello; print(devbox_hello.MESSAGE)'`,
			want:   []string{"python 3.", "Successfully installed devbox-hello-1.0", "hello from pypi.test"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			standIn := devboxtest.Env(t, tc.standInEnv)
			repo := toolchainRepo(t, e, w, tc.files, tc.marker, tc.detected, standIn)
			id, _, dexec, ws := upFenced(t, e, repo)
			script := "set -e; cd " + ws + " && id -un && " +
				"git add -A && git -c user.name=agent -c user.email=agent@x.test commit -qm 'from the container' && git log -1 --format=%s && " +
				tc.script + " && claude --version"
			out, err := dexec("sh", "-c", script).CombinedOutput()
			t.Logf("as the remote user:\n%s", out)
			if err != nil {
				t.Fatalf("as the remote user: %v", err)
			}
			for _, want := range append([]string{"dev\n", "from the container", "(Claude Code)"}, tc.want...) {
				if !strings.Contains(string(out), want) {
					t.Errorf("no %q in the output", want)
				}
			}
			prepare(t, e, id)
			escapeAs(t, dexec, w, ws, 40)
		})
	}
}
