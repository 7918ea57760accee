package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/tailscale/hujson"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// featureSource writes a --source tree for `devbox feature publish` from
// the repository's feature files: the root manifest, install.sh and the
// Claude Code lock. One change: installsAfter is dropped, because the Dev
// Containers CLI fetches the metadata of every installsAfter feature
// (ghcr.io/devcontainers/…) while it resolves the install order, even when
// the configuration does not use them: offline that fails the whole `up`
// ("getaddrinfo ENOTFOUND ghcr.io"), and a test must not ask a real
// registry anyway. Nothing else in the artifact differs from a release.
func featureSource(t testing.TB) string {
	t.Helper()
	raw, err := os.ReadFile("../devcontainer-feature.json")
	if err != nil {
		t.Fatal(err)
	}
	std, err := hujson.Standardize(raw)
	if err != nil {
		t.Fatalf("devcontainer-feature.json: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(std, &m); err != nil {
		t.Fatalf("devcontainer-feature.json: %v", err)
	}
	delete(m, "installsAfter")
	manifest, _ := json.MarshalIndent(m, "", "  ")
	dir := t.TempDir()
	files := map[string]string{
		"devcontainer-feature.json":      "",
		"features/src/devbox/install.sh": "../features/src/devbox/install.sh",
		"features/claude-code.lock.json": "../features/claude-code.lock.json",
	}
	for dst, src := range files {
		data := manifest
		if src != "" {
			if data, err = os.ReadFile(src); err != nil {
				t.Fatal(err)
			}
		}
		p := filepath.Join(dir, filepath.FromSlash(dst))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// publishFeature publishes the feature with the devbox binary under test to
// a fresh namespace of the local registry (credentials from DOCKER_CONFIG)
// and returns the NS/devbox@sha256:… reference it printed.
func publishFeature(t testing.TB, e env) name.Digest {
	t.Helper()
	ns := fmt.Sprintf("%s/e2e-feature/t%d", e.registry, time.Now().UnixNano())
	start := time.Now()
	out := run(t, "", nil, e.devbox, "feature", "publish", "--source", featureSource(t), ns)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	ref, err := name.NewDigest(lines[len(lines)-1], name.Insecure)
	if err != nil {
		t.Fatalf("devbox feature publish: last line is not a digest reference: %v\n%s", err, out)
	}
	if ref.Context().String() != ns+"/devbox" {
		t.Fatalf("devbox feature publish printed %s, want a digest in %s/devbox", ref, ns)
	}
	t.Logf("published %s in %v:\n%s", ref, time.Since(start).Round(time.Millisecond), out)
	return ref
}

// featureRef is how a devcontainer.json names the published feature. The
// CLI speaks plain HTTP only to a registry called "localhost", so the
// 127.0.0.1 registry is named localhost:PORT; the major tag is what a team
// writes.
func featureRef(t testing.TB, ref name.Digest) string {
	t.Helper()
	_, port, ok := strings.Cut(ref.RegistryStr(), ":")
	if !ok {
		t.Fatalf("registry %q has no port", ref.RegistryStr())
	}
	return "localhost:" + port + "/" + ref.RepositoryStr() + ":0"
}

// featureRepo writes what a team's existing dev container looks like — a
// three-line Dockerfile FROM the debootstrap base adding a non-root user,
// remoteUser/containerUser — plus the one feature line with options, and
// the world's network and DNS in runArgs.
func featureRepo(t testing.TB, e env, w *world, feature string, options map[string]any) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	e.d.ForgetDevcontainer(t, dir)
	os.MkdirAll(filepath.Join(dir, ".devcontainer"), 0o755)
	dockerfile := "ARG BASE\nFROM ${BASE}\nRUN useradd --create-home --uid 1000 --shell /bin/bash dev\n"
	cfg := map[string]any{
		"name":          "feature-e2e",
		"build":         map[string]any{"dockerfile": "Dockerfile", "args": map[string]string{"BASE": e.base}},
		"remoteUser":    "dev",
		"containerUser": "root",
		"features":      map[string]any{feature: options},
		"runArgs":       w.runArgs(),
		"containerEnv":  w.containerEnv(),
	}
	js, _ := json.MarshalIndent(cfg, "", "  ")
	os.WriteFile(filepath.Join(dir, ".devcontainer/Dockerfile"), []byte(dockerfile), 0o644)
	if err := os.WriteFile(filepath.Join(dir, ".devcontainer/devcontainer.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cliEnv is the Dev Containers CLI's environment: the test dockerd, and
// the registry's credentials in the CLI's own variable (it does not read
// DOCKER_CONFIG for features).
func cliEnv(t testing.TB, e env, feature string) []string {
	t.Helper()
	host, _, _ := strings.Cut(feature, "/")
	return []string{
		"DOCKER_HOST=" + e.d.Host,
		"DEVCONTAINERS_OCI_AUTH=" + host + "|" + devboxtest.Env(t, "DEVBOX_REGISTRY_USER") + "|" + devboxtest.Env(t, "DEVBOX_REGISTRY_PASSWORD"),
	}
}

// cliOutcome runs a devcontainer subcommand and decodes the JSON result
// it prints last; stderr is the build log.
func cliOutcome(e env, repo string, extra []string, args ...string) (outcome, id, log string) {
	outcome, id, log = cliOutcomeOnce(e, repo, extra, args...)
	if outcome != "success" && strings.Contains(log, "No such image: sha256:") {
		// A cached layer removed by another test's clean-up while this
		// build reused it: see devcontainerUp.
		return cliOutcomeOnce(e, repo, extra, args...)
	}
	return outcome, id, log
}

func cliOutcomeOnce(e env, repo string, extra []string, args ...string) (outcome, id, log string) {
	cmd := exec.Command(e.dcli, append(args, "--workspace-folder", repo, "--docker-path", e.d.Path)...)
	cmd.Env = append(os.Environ(), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	var res struct {
		Outcome     string `json:"outcome"`
		ContainerID string `json:"containerId"`
		Message     string `json:"message"`
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	json.Unmarshal([]byte(lines[len(lines)-1]), &res)
	return res.Outcome, res.ContainerID, stdout.String() + stderr.String()
}

// TestFeature: the devbox feature published with `devbox feature publish`
// to the local registry, added to a plain dev container (a Dockerfile FROM
// the debootstrap base that only adds a user) by one line in `features`,
// brought up by the real Dev Containers CLI on the test dockerd. The fence
// starts from the feature's entrypoint, the escape suite passes as the
// remote user, before and after a restart and with the DNS filter killed;
// bad option values fail `devcontainer build` with install.sh's message.
func TestFeature(t *testing.T) {
	e := setup(t)
	w := startWorld(t, e.d, e.base, e.worldd)
	control := "control-" + w.Nonce + ".test"
	e.d.Command(context.Background(), append(append([]string{"run", "--rm"}, w.runArgs()...), e.base, "getent", "hosts", control)...).Run()

	ref := publishFeature(t, e)
	feature := featureRef(t, ref)
	env := cliEnv(t, e, feature)
	opts := map[string]any{"presets": "", "allow": "allowed.test:8080"}

	upRan := false
	t.Run("up", func(t *testing.T) {
		upRan = true
		repo := featureRepo(t, e, w, feature, opts)
		start := time.Now()
		outcome, id, log := cliOutcome(e, repo, env, "up")
		if id != "" {
			t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", id).Run() })
		}
		if outcome != "success" {
			t.Fatalf("devcontainer up: outcome %q\n%s", outcome, tail(log))
		}
		t.Logf("devcontainer up (feature pulled, image built, started) took %v", time.Since(start).Round(time.Millisecond))
		// The image carries the feature we published (a fresh namespace),
		// and the properties it declares reached the container.
		label := e.d.Run(t, "inspect", "--format", `{{index .Config.Labels "devcontainer.metadata"}}`, id)
		if !strings.Contains(label, `"id":"`+feature+`"`) || !strings.Contains(label, "/usr/local/bin/devbox entrypoint") {
			t.Fatalf("the image's devcontainer.metadata does not name %s and its entrypoint: %s", feature, label)
		}
		hc := e.d.Run(t, "inspect", "--format", "{{json .HostConfig.CapAdd}} {{json .HostConfig.SecurityOpt}} {{.HostConfig.Init}}", id)
		for _, want := range []string{"NET_ADMIN", "NET_RAW", "no-new-privileges", "true"} {
			if !strings.Contains(hc, want) {
				t.Errorf("container host config %s lacks %s", hc, want)
			}
		}
		first := requireFenced(t, e.d, id, "")
		prepare(t, e, id)
		dexec := devcontainerExec(e, repo, env...)
		if out, err := dexec("id", "-un").Output(); err != nil || strings.TrimSpace(string(out)) != "dev" {
			t.Fatalf("devcontainer exec runs as %q (%v), want the remote user dev", out, err)
		}
		// No --workspace: a plain devcontainer.json has no read-only
		// mounts over .git/hooks and .devcontainer (see docs/feature.md).
		escapeAs(t, dexec, w, "", 35)
		requireEmbeddedDNS(t, e.d, id)
		restartFenced(t, e, w, id, first.StartID, dexec, "", 35)
	})

	t.Run("bad options", func(t *testing.T) {
		tests := []struct {
			name    string
			options map[string]any
			want    string
		}{
			{"semicolon in a host", map[string]any{"allow": "allowed.test;id"}, "option allow"},
			{"ampersand in a host", map[string]any{"allow": "allowed.test&id"}, "option allow"},
			{"NUL byte in a host", map[string]any{"allow": "allowed\x00evil.test"}, "contains a NUL byte"},
			{"unknown preset", map[string]any{"presets": "anthropic,everything"}, `unknown preset "everything"`},
			{"unpinned Claude Code", map[string]any{"claudeCode": "9.9.9"}, "9.9.9 is not pinned in this feature package"},
			{"latest Claude Code", map[string]any{"claudeCode": "latest"}, "never latest"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				repo := featureRepo(t, e, w, feature, tt.options)
				// The NUL byte travels as \u0000 in devcontainer.json.
				if raw, _ := os.ReadFile(filepath.Join(repo, ".devcontainer/devcontainer.json")); strings.Contains(tt.name, "NUL") && !strings.Contains(string(raw), `\u0000`) {
					t.Fatalf("devcontainer.json does not carry the NUL byte as \\u0000:\n%s", raw)
				}
				start := time.Now()
				outcome, _, log := cliOutcome(e, repo, env, "build")
				var msg string
				for _, line := range strings.Split(log, "\n") {
					if i := strings.Index(line, "devbox feature: "); i >= 0 && strings.Contains(line, tt.want) {
						msg = line[i:]
					}
				}
				if outcome == "success" || msg == "" {
					t.Fatalf("devcontainer build with %q: outcome %q, want a failure with install.sh saying %q:\n%s", tt.options, outcome, tt.want, tail(log))
				}
				t.Logf("devcontainer build failed in %v: %s", time.Since(start).Round(time.Millisecond), msg)
			})
		}
	})

	// The world's log proves the allowed connection only when "up" ran
	// (not under -run TestFeature/bad).
	if upRan {
		checkWorldLog(t, w, control)
	}
}
