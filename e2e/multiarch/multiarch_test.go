package multiarch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// claudeVersion is the Claude Code version the images pin (the same as
// internal/image's E2E, so BuildKit's cache holds its amd64 tarball).
const claudeVersion = "2.1.332"

// TestE2EMultiArch builds linux/amd64 and linux/arm64 in one `devbox build
// --platform … --push` on the stand-in bases' index (scripts/services: the
// arm64 one made by mmdebstrap under qemu-user), checks the pushed index and
// both manifests, that a rebuild gives the same index and that the amd64
// manifest is the one a single-platform build of the same inputs gives, and
// runs the arm64 image under emulation: uname, claude --version, devbox
// doctor (the same report as amd64's), the fence's compiled rules (the same
// as amd64's), and the entrypoint failing closed where qemu-user cannot load
// the rules.
func TestE2EMultiArch(t *testing.T) {
	buildkit := devboxtest.BuildkitHost(t)
	registry := devboxtest.Env(t, "DEVBOX_REGISTRY")
	dockerConfig := devboxtest.Env(t, "DOCKER_CONFIG")
	base := devboxtest.Env(t, "DEVBOX_BASE_IMAGE_MULTI")
	docker := devboxtest.DockerCLI(t)
	t.Setenv("DOCKER_CONFIG", dockerConfig)
	ctx := context.Background()
	dir := t.TempDir()

	// The arm64 stand-in base: `scripts/services up` started it in the
	// background; this waits for it (or makes it) and pushes the index.
	start := time.Now()
	services := exec.CommandContext(ctx, filepath.Join("..", "..", "scripts", "services"), "arm64-base")
	if out, err := services.CombinedOutput(); err != nil {
		t.Fatalf("scripts/services arm64-base: %v\n%s", err, out)
	}
	t.Logf("scripts/services arm64-base: %v", time.Since(start).Round(time.Second))

	// Private copies of the binaries: the shared ones are rebuilt by other
	// test processes, and a different binary is a different layer.
	amd64Bin := privateCopy(t, devboxtest.BuildDevbox(t), filepath.Join(dir, "devbox"))
	start = time.Now()
	arm64Bin := privateCopy(t, devboxtest.BuildDevboxFor(t, "arm64"), filepath.Join(dir, "devbox-arm64"))
	t.Logf("go build linux/arm64: %v", time.Since(start).Round(time.Second))

	devbox := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, amd64Bin, args...)
		cmd.Env = append(os.Environ(), "BUILDKIT_HOST="+buildkit, "DOCKER_CONFIG="+dockerConfig)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return strings.TrimSpace(stdout.String()), stderr.String(), err
	}

	// A tag per run: the registry is shared with every other test run.
	repo := fmt.Sprintf("%s/devbox/e2e-multi-%d", registry, time.Now().UnixNano())
	polPath := filepath.Join(dir, policy.DefaultFileName)
	src := fmt.Sprintf(`{"image": {"base": %q, "tag": %q}, "agent": {"claudeCode": %q}, "network": {"allow": ["api.anthropic.com:443"]}}`,
		base, repo+":e2e", claudeVersion)
	if err := os.WriteFile(polPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := devbox("lock", "--policy", polPath); err != nil {
		t.Fatalf("devbox lock: %v\n%s", err, stderr)
	}
	bins := []string{"--devbox-binary", "linux/amd64=" + amd64Bin, "--devbox-binary", "linux/arm64=" + arm64Bin}
	start = time.Now()
	out, stderr, err := devbox(append([]string{"build", "--policy", polPath, "--frozen", "--push",
		"--platform", "linux/amd64,linux/arm64", "--progress", "plain"}, bins...)...)
	if err != nil {
		t.Fatalf("devbox build --platform linux/amd64,linux/arm64: %v\n%s", err, lastLines(stderr, 40))
	}
	t.Logf("multi-platform build: %v; step times:\n%s", time.Since(start).Round(time.Second), stepTimes(stderr))
	if !strings.HasPrefix(out, repo+":e2e@sha256:") && !strings.HasPrefix(out, repo+"@sha256:") {
		t.Fatalf("devbox build printed %q, want %s@sha256:…", out, repo)
	}
	ref, err := name.ParseReference(out)
	if err != nil {
		t.Fatal(err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	idx, err := remote.Index(ref, auth)
	if err != nil {
		t.Fatalf("%s is not an index: %v", out, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	byArch := map[string]v1.Hash{}
	for _, m := range im.Manifests {
		if m.Platform == nil {
			t.Fatalf("index entry %s has no platform", m.Digest)
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != m.Platform.Architecture || cf.OS != "linux" {
			t.Errorf("manifest %s: index says %s, config says %s/%s", m.Digest, m.Platform, cf.OS, cf.Architecture)
		}
		byArch[m.Platform.Architecture] = m.Digest
		t.Logf("index %s: linux/%s manifest %s", ref.Identifier(), m.Platform.Architecture, m.Digest)
	}
	if len(im.Manifests) != 2 || byArch["amd64"].Hex == "" || byArch["arm64"].Hex == "" {
		t.Fatalf("index has %d manifests %v, want linux/amd64 and linux/arm64", len(im.Manifests), byArch)
	}

	t.Run("reproducible", func(t *testing.T) {
		// The same inputs again: the same index digest.
		again, stderr, err := devbox(append([]string{"build", "--policy", polPath, "--frozen", "--push",
			"--platform", "linux/amd64,linux/arm64", "--progress", "quiet"}, bins...)...)
		if err != nil {
			t.Fatalf("second build: %v\n%s", err, lastLines(stderr, 20))
		}
		if digestOf(again) != digestOf(out) {
			t.Errorf("second multi-platform build gave %s, first %s", again, out)
		}
		t.Logf("rebuild: %s", again)
		// One platform, same inputs: the index's amd64 manifest.
		one, stderr, err := devbox("build", "--policy", polPath, "--frozen", "--push", "--tag", repo+":amd64",
			"--platform", "linux/amd64", "--progress", "quiet", "--devbox-binary", "linux/amd64="+amd64Bin)
		if err != nil {
			t.Fatalf("amd64 build: %v\n%s", err, lastLines(stderr, 20))
		}
		if digestOf(one) != byArch["amd64"].String() {
			t.Errorf("amd64-only build %s, want the index's amd64 manifest %s", one, byArch["amd64"])
		}
	})

	t.Run("arm64 under emulation", func(t *testing.T) {
		arm := repo + "@" + byArch["arm64"].String()
		amd := repo + "@" + byArch["amd64"].String()
		start := time.Now()
		// Both are 0.7 GB and only this test runs them: removed when it
		// ends, or a run of the tests keeps them (docs/testing.md, Disk).
		t.Cleanup(func() { docker.Command(context.Background(), "rmi", arm, amd).Run() })
		docker.Run(t, "pull", "-q", arm)
		docker.Run(t, "pull", "-q", amd)
		t.Logf("docker pull of both: %v", time.Since(start).Round(time.Second))
		// --network none: nothing these containers do can leave, fence or no
		// fence.
		run := func(platform string, args ...string) (string, error) {
			b, err := docker.Command(ctx, append([]string{"run", "--rm", "--network", "none", "--platform", platform}, args...)...).CombinedOutput()
			return string(b), err
		}
		got, err := run("linux/arm64", "--entrypoint", "/bin/sh", arm, "-c", "uname -m; claude --version")
		if err != nil || !strings.Contains(got, "aarch64\n") || !strings.Contains(got, claudeVersion+" (Claude Code)") {
			t.Errorf("arm64 uname -m; claude --version (%v):\n%s", err, got)
		}
		t.Logf("arm64: %s", strings.ReplaceAll(strings.TrimSpace(got), "\n", " | "))

		// doctor, with the fence never started: the arm64 binary under
		// emulation reports what the amd64 one does natively.
		doctor := []string{"--entrypoint", layout.BinaryPath, "--user", "1000"}
		a64, errA := run("linux/arm64", append(doctor, arm, "doctor")...)
		x64, errX := run("linux/amd64", append(doctor, amd, "doctor")...)
		t.Logf("arm64 devbox doctor (exit %v):\n%s", errA, a64)
		if !strings.Contains(a64, "fence") {
			t.Errorf("arm64 devbox doctor printed no report (%v):\n%s", errA, a64)
		}
		// Check by check, the same verdicts; the details may differ where
		// qemu-user turns an errno into another (bwrap's namespace error).
		if va, vx := verdicts(a64), verdicts(x64); len(va) < 5 || !slices.Equal(va, vx) || exitCode(errA) != exitCode(errX) {
			t.Errorf("devbox doctor differs: arm64 (exit %d):\n%s\namd64 (exit %d):\n%s", exitCode(errA), a64, exitCode(errX), x64)
		}

		// The fence's compiled rules: the arm64 binary compiles what the
		// amd64 one does from the same baked policy.
		rules := []string{"--entrypoint", layout.BinaryPath}
		a64, err = run("linux/arm64", append(rules, arm, "firewall", "rules", "--resolv-conf", "/dev/null")...)
		if err != nil {
			t.Fatalf("arm64 devbox firewall rules: %v\n%s", err, a64)
		}
		x64, err = run("linux/amd64", append(rules, amd, "firewall", "rules", "--resolv-conf", "/dev/null")...)
		if err != nil {
			t.Fatalf("amd64 devbox firewall rules: %v\n%s", err, x64)
		}
		if a64 != x64 || !strings.Contains(a64, "DEVBOX-OUTPUT") {
			t.Errorf("arm64 and amd64 compile different rules:\narm64:\n%s\namd64:\n%s", a64, x64)
		}
		t.Logf("arm64 and amd64 compile the same rules (%d lines)", strings.Count(a64, "\n"))

		// Whether qemu-user can load rules at all: iptables talks
		// NETLINK_NETFILTER, which it may not translate.
		caps := []string{"--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW"}
		probe, probeErr := run("linux/arm64", append(caps, "--entrypoint", "/usr/sbin/iptables", arm, "-w", "-S", "OUTPUT")...)
		t.Logf("arm64 iptables -S OUTPUT under qemu-user (exit %d):\n%s", exitCode(probeErr), probe)
		got, err = run("linux/arm64", append(caps, arm, "echo", "command-ran")...)
		t.Logf("arm64 entrypoint under qemu-user (exit %d):\n%s", exitCode(err), lastLines(got, 10))
		if probeErr != nil {
			// Emulation cannot load rules: the entrypoint must fail closed,
			// never start the command unfenced.
			if err == nil || strings.Contains(got, "command-ran") {
				t.Errorf("the arm64 entrypoint ran the command with no fence loaded (%v):\n%s", err, got)
			}
		} else if err != nil || !strings.Contains(got, "command-ran") {
			// Emulation can: then the fence must come up as on amd64.
			t.Errorf("iptables works under emulation but the arm64 entrypoint did not start the command (%v):\n%s", err, got)
		}
	})
}

// privateCopy copies the executable src to dst and returns dst.
func privateCopy(t *testing.T, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestArm64BaseHasImagePackages keeps scripts/services' ARM64_INCLUDE equal
// to the packages every image installs: with one missing, the arm64
// build's apt step would unpack and configure it under emulation, which is
// what preinstalling them avoids.
func TestArm64BaseHasImagePackages(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "services"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ARM64_INCLUDE=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/services has no ARM64_INCLUDE=… line")
	}
	got := strings.Split(string(m[1]), ",")
	want := slices.Concat(image.BasePackages, image.DefaultTools)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ARM64_INCLUDE = %v, want image.BasePackages + image.DefaultTools = %v", got, want)
	}
}

// verdict is one line of doctor's text report: "[ ok ]  sudo   …" → "ok sudo".
var verdict = regexp.MustCompile(`^\[\s*(\w+)\s*\]\s+(\S+(?: \S+)*)`)

// verdicts returns each check's status and name from doctor's text report.
func verdicts(report string) []string {
	var out []string
	for _, l := range strings.Split(report, "\n") {
		if m := verdict.FindStringSubmatch(l); m != nil {
			out = append(out, m[1]+" "+m[2])
		}
	}
	return out
}

// digestOf returns the sha256:… part of a REF@sha256:… line.
func digestOf(ref string) string {
	_, d, _ := strings.Cut(ref, "@")
	return d
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stepTimes picks BuildKit's "#N DONE 12.3s" lines with their vertex names
// out of plain progress, so the log says which steps emulation made slow.
func stepTimes(progress string) string {
	names := map[string]string{}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(progress))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "#") {
			continue
		}
		switch {
		case strings.HasPrefix(f[1], "["):
			if _, ok := names[f[0]]; !ok {
				names[f[0]] = strings.Join(f[1:], " ")
			}
		case f[1] == "DONE" && len(f) > 2 && names[f[0]] != "":
			out = append(out, fmt.Sprintf("  %8s  %s", f[2], names[f[0]]))
		}
	}
	return strings.Join(out, "\n")
}
