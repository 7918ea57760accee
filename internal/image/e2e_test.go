package image_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/buildkit/client"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

// e2eClaude is the Claude Code version the E2E build pins (its platform
// tarball is 186 MB; BuildKit caches it between runs).
const e2eClaude = "2.1.332"

type e2eEnv struct {
	buildkit, registry, base, dockerConfig string
	devbox                                 string
	docker                                 devboxtest.Docker
	dir                                    string
	// cache is devbox's image cache for this test's builds, the CLI's
	// (DEVBOX_CACHE_DIR) and the library's: its own, so another test's
	// heavy images are never this test's.
	cache string
}

func newE2E(t *testing.T) *e2eEnv {
	t.Helper()
	e := &e2eEnv{
		buildkit:     devboxtest.BuildkitHost(t),
		registry:     devboxtest.Env(t, "DEVBOX_REGISTRY"),
		base:         devboxtest.Env(t, "DEVBOX_BASE_IMAGE"),
		dockerConfig: devboxtest.Env(t, "DOCKER_CONFIG"),
		docker:       devboxtest.DockerCLI(t),
		dir:          t.TempDir(),
	}
	e.cache = filepath.Join(e.dir, "cache")
	// A private copy: the shared test binary is rebuilt by other test
	// processes, and a different binary is a different layer.
	b, err := os.ReadFile(devboxtest.BuildDevbox(t))
	if err != nil {
		t.Fatal(err)
	}
	e.devbox = filepath.Join(e.dir, "devbox")
	if err := os.WriteFile(e.devbox, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// writePolicy writes a policy for the E2E base and registry; allow is the
// network allow list, the only thing the rebuild test changes.
func (e *e2eEnv) writePolicy(t *testing.T, dir, repo string, allow ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(allow)
	src := fmt.Sprintf(`{
  // E2E policy (internal/image/e2e_test.go)
  "image": {
    "base": %q,
    "user": { "name": "dev", "uid": 1000, "gid": 1000 },
    "packages": ["git"],
    "tag": %q,
  },
  "agent": { "claudeCode": %q },
  "network": { "allow": %s },
}
`, e.base, e.registry+"/"+repo+":e2e", e2eClaude, a)
	path := filepath.Join(dir, policy.DefaultFileName)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// devboxCmd runs the devbox binary with the E2E environment plus env and
// returns stdout and stderr.
func (e *e2eEnv) devboxCmd(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(e.devbox, args...)
	cmd.Env = append(os.Environ(), "BUILDKIT_HOST="+e.buildkit, "DOCKER_CONFIG="+e.dockerConfig, "DEVBOX_CACHE_DIR="+e.cache)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return strings.TrimSpace(stdout.String()), stderr.String(), err
}

func (e *e2eEnv) spec(t *testing.T, policyPath string) image.Spec {
	t.Helper()
	p, err := policy.Load(policyPath)
	if err != nil {
		t.Fatal(err)
	}
	l, err := policy.ReadLock(policy.LockPath(policyPath))
	if err != nil {
		t.Fatal(err)
	}
	// Source as `devbox build` sets it by default, so the library builds
	// here make the same image as the CLI.
	return image.Spec{Policy: p, Lock: l, Platform: "linux/amd64", Source: "https://github.com/devbox-dev/devbox"}
}

// build builds spec with the shared BuildKit and the test's image cache,
// as the CLI does.
func (e *e2eEnv) build(t *testing.T, spec image.Spec, push string) (*image.Result, error) {
	t.Helper()
	return e.buildAt(t, e.buildkit, spec, push, nil, e.cache)
}

// buildAt builds spec on the BuildKit daemon at host, importing the build
// cache from cacheFrom, with devbox's image cache in cacheDir ("" none:
// BuildKit builds and exports the heavy image).
func (e *e2eEnv) buildAt(t *testing.T, host string, spec image.Spec, push string, cacheFrom []client.CacheOptionsEntry, cacheDir string) (*image.Result, error) {
	t.Helper()
	t.Setenv("DOCKER_CONFIG", e.dockerConfig)
	ctx := context.Background()
	c, err := image.Connect(ctx, host, image.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return image.Build(ctx, c, image.BuildOptions{
		Specs:         []image.Spec{spec},
		DevboxVersion: "0.1.0-dev",
		Binaries:      map[string]string{"linux/amd64": e.devbox},
		Push:          []string{push},
		CacheFrom:     cacheFrom,
		CacheDir:      cacheDir,
		Progress:      "quiet",
	})
}

// freshBuildkitd starts a second, short-lived buildkitd with an empty
// cache on its own socket and root, as a second machine would be, and
// returns its address. The shared daemon's cache is left alone: pruning it
// would slow every other build of the suite.
func freshBuildkitd(t *testing.T) string {
	t.Helper()
	return startBuildkitd(t, "", image.TLS{})
}

// startBuildkitd starts a buildkitd with an empty cache and its own root, on
// addr ("" for a unix socket in its directory) with extra flags, and
// returns its address once a client with tls can connect.
func startBuildkitd(t *testing.T, addr string, tls image.TLS, extra ...string) string {
	t.Helper()
	bin := devboxtest.RequireBinary(t, "buildkitd")
	runc := devboxtest.RequireBinary(t, "runc")
	devboxtest.RequireRoot(t)
	// Short: a unix socket path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "dbxbk")
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "unix://" + filepath.Join(dir, "bk.sock")
	}
	logPath := filepath.Join(dir, "buildkitd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--addr", addr, "--root", filepath.Join(dir, "root"),
		"--oci-worker=true", "--oci-worker-binary", runc, "--containerd-worker=false"}, extra...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		os.RemoveAll(dir)
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := image.Connect(context.Background(), addr, tls)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case werr := <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("second buildkitd exited (%v):\n%s", werr, lastLines(string(b), 20))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("second buildkitd did not answer within 60s: %v\n%s", err, lastLines(string(b), 20))
		}
	}
}

// TestE2EBuild is the image builder's end-to-end test: `devbox lock` and
// `devbox build --push` against the test BuildKit, registry and base image;
// then the image is inspected from the registry and run in the test Docker
// engine with no network.
func TestE2EBuild(t *testing.T) {
	e := newE2E(t)
	ctx := context.Background()
	t.Setenv("DOCKER_CONFIG", e.dockerConfig)
	dir := filepath.Join(e.dir, "repo")
	polPath := e.writePolicy(t, dir, "devbox/e2e-image", "api.anthropic.com:443")

	// devbox lock: base digest through the Docker config keychain (the
	// registry has htpasswd auth), Claude Code pinned from npm metadata.
	out, stderr, err := e.devboxCmd(t, nil, "lock", "--policy", polPath)
	if err != nil {
		t.Fatalf("devbox lock: %v\n%s", err, stderr)
	}
	lock, err := policy.ReadLock(policy.LockPath(polPath))
	if err != nil {
		t.Fatalf("devbox lock printed %q but: %v", out, err)
	}
	want, err := registry.Resolve(ctx, e.base)
	if err != nil {
		t.Fatal(err)
	}
	if lock.Base.Digest != want.DigestStr() {
		t.Errorf("lock base digest %s, registry says %s", lock.Base.Digest, want.DigestStr())
	}
	if pk := lock.ClaudeCode.Platforms["linux/amd64"]; pk.Package != "@anthropic-ai/claude-code-linux-x64" || !strings.HasPrefix(pk.Integrity, "sha512-") {
		t.Errorf("lock pins Claude Code as %+v", pk)
	}

	// devbox build --frozen --push prints repo@digest on stdout.
	refsFile := filepath.Join(e.dir, "refs")
	start := time.Now()
	out, stderr, err = e.devboxCmd(t, nil, "build", "--policy", polPath, "--frozen", "--push", "--progress", "plain", "--image-refs", refsFile)
	if err != nil {
		t.Fatalf("devbox build: %v\n%s", err, stderr)
	}
	t.Logf("first build (CLI): %v", time.Since(start).Round(time.Millisecond))
	repo := e.registry + "/devbox/e2e-image"
	if !strings.HasPrefix(out, repo+"@sha256:") || strings.Contains(out, "\n") {
		t.Fatalf("devbox build printed %q, want one %s@sha256:… line", out, repo)
	}
	if b, _ := os.ReadFile(refsFile); strings.TrimSpace(string(b)) != out {
		t.Errorf("--image-refs wrote %q, stdout %q", b, out)
	}
	ref := out
	digest1 := ref[strings.Index(ref, "@")+1:]

	t.Run("config", func(t *testing.T) {
		img, err := registry.Pull(ctx, ref, "linux/amd64")
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		spec := e.spec(t, polPath)
		md, _ := image.Metadata(spec.Policy)
		if got := cf.Config.Labels[image.MetadataLabel]; got != md {
			t.Errorf("devcontainer.metadata label %s, want %s", got, md)
		}
		if cf.Config.User != "root" || strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/devbox entrypoint --" ||
			strings.Join(cf.Config.Cmd, " ") != "sleep infinity" {
			t.Errorf("config user %q entrypoint %q cmd %q", cf.Config.User, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if got := cf.Created.UTC(); !got.Equal(image.Created(spec.Lock)) {
			t.Errorf("created %v, want the lock's SOURCE_DATE_EPOCH %v", got, image.Created(spec.Lock))
		}
		layers, _ := img.Layers()
		var sizes []string
		for _, l := range layers {
			sz, _ := l.Size()
			sizes = append(sizes, fmt.Sprintf("%.1fMB", float64(sz)/1e6))
		}
		t.Logf("layers (compressed, base first): %s", strings.Join(sizes, " "))
	})

	t.Run("inside", func(t *testing.T) {
		pj, err := image.PolicyJSON(e.spec(t, polPath).Policy)
		if err != nil {
			t.Fatal(err)
		}
		e.docker.Run(t, "pull", "-q", ref)
		script := strings.Join([]string{
			"echo uid=$(id -u dev) gid=$(id -g dev) home=$(getent passwd dev | cut -d: -f6)",
			"echo dns=$(id -u devbox-dns):$(getent passwd devbox-dns | cut -d: -f7)",
			"echo sudo=$(command -v sudo || echo none)",
			"echo setuid=$(find / -xdev -type f -perm /6000 | wc -l)",
			"echo claude=$(claude --version)",
			"echo devbox=$(" + layout.BinaryPath + " --version | cut -d' ' -f1)",
			"echo logdir=$(stat -c %u /var/log/devbox)",
			"echo updater=$(cat " + image.ClaudeSettingsPath + ")",
			"echo policy=$(sha256sum " + layout.PolicyPath + " | cut -d' ' -f1)",
			// The default tools, the locale, git's safe.directory and the
			// toolchain caches owned by the user.
			"echo tools=$(for c in git ps less curl jq rg unzip; do command -v $c >/dev/null || printf 'missing-%s ' $c; done)ok",
			"echo completion=$(test -f /usr/share/bash-completion/bash_completion && echo yes)",
			"echo lang=$LANG",
			"echo safe=$(git config --system --get safe.directory)",
			"echo caches=$(stat -c %u /home/dev/.cache /home/dev/.npm /home/dev/go | paste -sd, -)",
			// The lean packages step: git works without the full Perl
			// (perl-base's perl stays, Pod::Usage from perl-modules is
			// gone) and without its server programs.
			"cd $(mktemp -d) && git init -q && git -c user.name=a -c user.email=a@x.test commit -q --allow-empty -m lean && echo gitlog=$(git log --format=%s) && cd /",
			"echo perl=$(perl -e 'print 1+1') podusage=$(perl -MPod::Usage -e1 2>/dev/null && echo yes || echo no)",
			"echo gitdaemon=$(git daemon --version >/dev/null 2>&1 && echo yes || echo no)",
			"echo dpkgcfg=$(ls /etc/dpkg/dpkg.cfg.d | grep -c devbox)",
		}, "; ")
		got := e.docker.Run(t, "run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", ref, "-c", script)
		sum := sha256Hex(pj)
		for _, w := range []string{
			"uid=1000 gid=1000 home=/home/dev",
			"dns=998:/usr/sbin/nologin",
			"sudo=none",
			"setuid=0",
			"claude=" + e2eClaude + " (Claude Code)",
			"devbox=devbox",
			"logdir=998",
			`updater={"env":{"DISABLE_AUTOUPDATER":"1"}}`,
			"policy=" + sum,
			"tools=ok",
			"completion=yes",
			"lang=C.UTF-8",
			"safe=*",
			"caches=1000,1000,1000",
			"gitlog=lean",
			"perl=2 podusage=no",
			"gitdaemon=no",
			"dpkgcfg=0",
		} {
			if !strings.Contains(got, w+"\n") && !strings.HasSuffix(got, w) {
				t.Errorf("inside the image: want %q in\n%s", w, got)
			}
		}

		// The login banner: a login shell of the agent's user in a
		// container whose fence never started (the entrypoint is
		// replaced) must say so loudly, and the shell must go on.
		out, err := e.docker.Command(ctx, "run", "--rm", "--network", "none", "--user", "dev", "--entrypoint", "/bin/bash",
			ref, "-lc", "echo shell-went-on").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "shell-went-on") ||
			!strings.Contains(string(out), "devbox: [FAIL] fence") {
			t.Errorf("login shell in an unfenced container (%v): want a [FAIL] fence line from %s and the shell to go on:\n%s",
				err, image.LoginBannerPath, out)
		}
	})

	t.Run("devcontainer read-configuration", func(t *testing.T) {
		cli := devboxtest.Env(t, "DEVBOX_DEVCONTAINER_CLI")
		ws := filepath.Join(e.dir, "ws")
		os.MkdirAll(filepath.Join(ws, ".devcontainer"), 0o755)
		os.WriteFile(filepath.Join(ws, ".devcontainer", "devcontainer.json"), []byte(`{"image": "`+ref+`"}`), 0o644)
		cmd := exec.Command(cli, "read-configuration", "--workspace-folder", ws, "--include-merged-configuration",
			"--docker-path", e.docker.Path)
		cmd.Env = e.docker.Env()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("devcontainer read-configuration: %v\n%s", err, stderr.String())
		}
		var rc struct {
			Merged struct {
				RemoteUser    string   `json:"remoteUser"`
				ContainerUser string   `json:"containerUser"`
				CapAdd        []string `json:"capAdd"`
				SecurityOpt   []string `json:"securityOpt"`
				Init          bool     `json:"init"`
				Entrypoints   []string `json:"entrypoints"`
			} `json:"mergedConfiguration"`
		}
		if err := json.Unmarshal(b, &rc); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		m := rc.Merged
		if m.RemoteUser != "dev" || m.ContainerUser != "root" || !m.Init ||
			strings.Join(m.CapAdd, ",") != "NET_ADMIN,NET_RAW" || strings.Join(m.SecurityOpt, ",") != "no-new-privileges" ||
			strings.Join(m.Entrypoints, ",") != layout.BinaryPath+" entrypoint" {
			t.Errorf("merged configuration read from the image: %+v", m)
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		// Another machine, as far as devbox is concerned: an empty image
		// cache, so BuildKit exports the heavy image again (its steps all
		// cached) and rewrites its timestamps; the digest is the same.
		res, err := e.buildAt(t, e.buildkit, e.spec(t, polPath), repo+":e2e", nil, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("identical build, empty image cache: %v, digests %s and %s", res.Elapsed.Round(time.Millisecond), digest1, res.Digest)
		if res.Digest != digest1 {
			t.Errorf("identical rebuild with an empty image cache gave %s, first build %s", res.Digest, digest1)
		}
		if res.HeavyFromCache {
			t.Error("an empty image cache gave the heavy image")
		}
		for _, v := range res.Steps() {
			if !v.Cached {
				t.Errorf("identical rebuild ran %s again", v.Name)
			}
		}
		if len(res.Steps()) < 4 {
			t.Errorf("only %d steps reported; the cache assertion is empty", len(res.Steps()))
		}
		// With the CLI's image cache: no BuildKit at all, same digest.
		res, err = e.build(t, e.spec(t, polPath), repo+":e2e")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("identical build, image cache: %v, digest %s", res.Elapsed.Round(time.Millisecond), res.Digest)
		if res.Digest != digest1 || !res.HeavyFromCache || len(res.Vertices) != 0 {
			t.Errorf("identical rebuild from the image cache: digest %s (first %s), heavy from the cache %v, %d BuildKit vertices; want the same digest and no BuildKit",
				res.Digest, digest1, res.HeavyFromCache, len(res.Vertices))
		}
	})

	t.Run("network change rebuilds only the policy layer", func(t *testing.T) {
		pol2 := e.writePolicy(t, filepath.Join(e.dir, "repo2"), "devbox/e2e-image", "api.anthropic.com:443", "registry.npmjs.org:443")
		b, _ := os.ReadFile(policy.LockPath(polPath))
		os.WriteFile(policy.LockPath(pol2), b, 0o644)
		spec := e.spec(t, pol2)
		if err := spec.Lock.Check(spec.Policy, "", []string{"linux/amd64"}); err != nil {
			t.Fatalf("a network change made the lock stale: %v", err)
		}
		res, err := e.build(t, spec, repo+":e2e-net")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("policy-only rebuild: %v -> %s", res.Elapsed.Round(time.Millisecond), res.Digest)
		if res.Digest == digest1 {
			t.Error("a different policy gave the same digest")
		}
		if !res.HeavyFromCache || len(res.Vertices) != 0 {
			t.Errorf("a network-only change: heavy image from the cache %v, %d BuildKit vertices; want the cached heavy image and no BuildKit", res.HeavyFromCache, len(res.Vertices))
		}
		// In the registry: the same layers but the last, another config.
		img1, err := registry.Pull(ctx, ref, "linux/amd64")
		if err != nil {
			t.Fatal(err)
		}
		img2, err := registry.Pull(ctx, repo+"@"+res.Digest, "linux/amd64")
		if err != nil {
			t.Fatal(err)
		}
		m1, _ := img1.Manifest()
		m2, err := img2.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		n := len(m1.Layers)
		if len(m2.Layers) != n || n < 5 {
			t.Fatalf("%d layers, then %d", n, len(m2.Layers))
		}
		for i := range n - 1 {
			if m1.Layers[i].Digest != m2.Layers[i].Digest {
				t.Errorf("layer %d changed: %s → %s", i, m1.Layers[i].Digest, m2.Layers[i].Digest)
			}
		}
		if m1.Layers[n-1].Digest == m2.Layers[n-1].Digest || m1.Config.Digest == m2.Config.Digest {
			t.Error("the policy layer or the config did not change")
		}
		t.Logf("new: policy layer %s (%d bytes), config %s (%d bytes)", m2.Layers[n-1].Digest, m2.Layers[n-1].Size, m2.Config.Digest, m2.Config.Size)
		// The new policy is in the last layer.
		layers, _ := img2.Layers()
		pj, _ := image.PolicyJSON(spec.Policy)
		found := image.LayerHolds(t, layers[n-1], layout.PolicyPath, pj)
		if !found {
			t.Errorf("the last layer does not hold %s with the new policy", layout.PolicyPath)
		}
	})

	t.Run("registry cache round trip", func(t *testing.T) {
		// Export the build cache (mode=max: every step, the Claude stage
		// too) to the registry from the shared daemon...
		cacheRef := e.registry + "/devbox/e2e-cache:buildcache"
		start := time.Now()
		out, stderr, err := e.devboxCmd(t, nil, "build", "--policy", polPath, "--frozen", "--push", "--progress", "plain",
			"--cache-to", "type=registry,ref="+cacheRef+",mode=max")
		if err != nil {
			t.Fatalf("devbox build --cache-to: %v\n%s", err, lastLines(stderr, 20))
		}
		t.Logf("build with --cache-to (shared daemon, warm): %v", time.Since(start).Round(time.Millisecond))
		if ok, err := registry.Exists(ctx, cacheRef); err != nil || !ok {
			t.Fatalf("no cache manifest at %s after --cache-to (exists=%v, %v)", cacheRef, ok, err)
		}
		if !strings.HasSuffix(out, "@"+digest1) {
			t.Errorf("build with --cache-to gave %s, want digest %s", out, digest1)
		}

		// ...then build on a second daemon with an empty cache, as another
		// machine would, importing only that cache.
		host := freshBuildkitd(t)
		cacheFrom := []client.CacheOptionsEntry{{Type: "registry", Attrs: map[string]string{"ref": cacheRef}}}
		res, err := e.buildAt(t, host, e.spec(t, polPath), repo+":e2e-from-cache", cacheFrom, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("fresh daemon, --cache-from the registry: %v; digest %s (first build %s)", res.Elapsed.Round(time.Millisecond), res.Digest, digest1)
		// Every step but the last comes from the registry cache. The last
		// one, now the devbox binary's copy, may be run again by BuildKit
		// v0.34.2 on the fresh daemon (observed with the policy when it was
		// BuildKit's last step: the final vertex's record is not taken from
		// the imported cache); a copy costs little and, as the digest check
		// below shows, gives the same layer.
		var ran []string
		for _, v := range res.Steps() {
			if !v.Cached && v.Name != image.VertexPrefix+"devbox" {
				ran = append(ran, v.Name)
			}
		}
		if len(ran) > 0 {
			t.Errorf("a fresh daemon with the registry cache ran %q again; every step but the last should come from the cache", ran)
		}
		if len(res.Steps()) < 5 {
			t.Errorf("only %d steps reported; the cache assertion is empty", len(res.Steps()))
		}
		if res.Digest != digest1 {
			t.Errorf("the image built from the registry cache on another daemon is %s, the first build %s", res.Digest, digest1)
		}
	})

	t.Run("wrong claude sha512 fails and pushes nothing", func(t *testing.T) {
		spec := e.spec(t, polPath)
		pk := spec.Lock.ClaudeCode.Platforms["linux/amd64"]
		pk.Integrity = "sha512-" + strings.Repeat("A", 86) + "=="
		spec.Lock.ClaudeCode.Platforms["linux/amd64"] = pk
		tag := repo + ":e2e-badsum"
		_, err := e.build(t, spec, tag)
		if err == nil || !strings.Contains(err.Error(), "claude-verify failed") || !strings.Contains(err.Error(), "does not match the lock") {
			t.Fatalf("build with a wrong sha512 = %v, want a claude-verify failure", err)
		}
		if ok, err := registry.Exists(ctx, tag); err != nil || ok {
			t.Errorf("after a failed build, %s exists=%v (%v)", tag, ok, err)
		}
	})

	t.Run("missing base digest fails and pushes nothing", func(t *testing.T) {
		spec := e.spec(t, polPath)
		spec.Lock.Base.Digest = "sha256:" + strings.Repeat("0", 64)
		tag := repo + ":e2e-nobase"
		_, err := e.build(t, spec, tag)
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("build from a missing base digest = %v, want not found", err)
		}
		if ok, err := registry.Exists(ctx, tag); err != nil || ok {
			t.Errorf("after a failed build, %s exists=%v (%v)", tag, ok, err)
		}
	})

	t.Run("bad credentials", func(t *testing.T) {
		bad := filepath.Join(e.dir, "bad-docker-config")
		os.MkdirAll(bad, 0o700)
		auth := fmt.Sprintf(`{"auths":{%q:{"auth":"ZGV2Ym94Ondyb25n"}}}`, e.registry) // devbox:wrong
		os.WriteFile(filepath.Join(bad, "config.json"), []byte(auth), 0o600)
		_, stderr, err := e.devboxCmd(t, []string{"DOCKER_CONFIG=" + bad}, "lock", "--policy", polPath)
		if err == nil || !strings.Contains(stderr, "refused the credentials") {
			t.Errorf("devbox lock with wrong credentials: %v\n%s", err, stderr)
		}
		tag := repo + ":e2e-badcreds"
		_, stderr, err = e.devboxCmd(t, []string{"DOCKER_CONFIG=" + bad}, "build", "--policy", polPath, "--frozen", "--push", "--tag", tag, "--progress", "plain")
		if err == nil {
			t.Fatal("devbox build --push with wrong credentials succeeded")
		}
		if !strings.Contains(stderr, "401") && !strings.Contains(strings.ToLower(stderr), "unauthorized") {
			t.Errorf("the error does not say the registry refused the credentials:\n%s", lastLines(stderr, 5))
		}
		if ok, err := registry.Exists(ctx, tag); err != nil || ok {
			t.Errorf("after a refused push, %s exists=%v (%v)", tag, ok, err)
		}
	})

	t.Run("load into docker", func(t *testing.T) {
		tag := "devbox-e2e:load"
		t.Cleanup(func() { e.docker.Command(context.Background(), "rmi", tag).Run() }) // 0.6 GB
		_, stderr, err := e.devboxCmd(t, []string{"DOCKER_HOST=" + e.docker.Host}, "build", "--policy", polPath, "--frozen", "--load", "--tag", tag, "--progress", "plain")
		if err != nil {
			t.Fatalf("devbox build --load: %v\n%s", err, lastLines(stderr, 20))
		}
		got := e.docker.Run(t, "image", "inspect", tag, "--format", `{{index .Config.Labels "dev.devbox.claude-code"}} {{json .Config.Entrypoint}}`)
		if want := e2eClaude + ` ["/usr/local/bin/devbox","entrypoint","--"]`; got != want {
			t.Errorf("loaded image: %s, want %s", got, want)
		}
	})

	t.Run("push copies keeping the digest", func(t *testing.T) {
		ociDir := filepath.Join(e.dir, "oci")
		_, stderr, err := e.devboxCmd(t, nil, "build", "--policy", polPath, "--frozen", "--output", "oci="+ociDir, "--progress", "plain")
		if err != nil {
			t.Fatalf("devbox build --output: %v\n%s", err, lastLines(stderr, 20))
		}
		out, stderr, err := e.devboxCmd(t, nil, "push", ociDir, repo+":e2e-copy", e.registry+"/devbox/e2e-copy2")
		if err != nil {
			t.Fatalf("devbox push: %v\n%s", err, stderr)
		}
		want := repo + "@" + digest1 + "\n" + e.registry + "/devbox/e2e-copy2@" + digest1
		if out != want {
			t.Errorf("devbox push printed\n%s\nwant\n%s", out, want)
		}
	})
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
