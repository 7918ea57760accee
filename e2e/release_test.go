package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

var release struct {
	once      sync.Once
	dir, bin  string
	version   string
	log       string
	err       error
	buildTime time.Duration
}

// releaseBinary runs `scripts/release --targets linux/amd64` once per test
// binary into a temporary directory and returns the devbox binary taken
// out of its archive, the way a user installs it, and the release
// directory (archive, SBOM, SHA256SUMS). The journey test runs this binary.
func releaseBinary(t testing.TB) (bin, dir string) {
	t.Helper()
	devboxtest.RequireE2E(t)
	release.once.Do(func() {
		dir, err := os.MkdirTemp("", "devbox-release-test-")
		if err != nil {
			release.err = err
			return
		}
		release.dir, release.version = dir, "v0.0.0-e2e"
		start := time.Now()
		out, err := exec.Command("timeout", "20m", "../scripts/release", "--targets", "linux/amd64",
			"--version", release.version, "--out", dir).CombinedOutput()
		release.buildTime, release.log = time.Since(start), string(out)
		if err != nil {
			release.err = err
			return
		}
		name := "devbox_" + release.version + "_linux_amd64"
		if out, err := exec.Command("tar", "-xzf", filepath.Join(dir, name+".tar.gz"), "-C", dir).CombinedOutput(); err != nil {
			release.err, release.log = err, release.log+string(out)
			return
		}
		release.bin = filepath.Join(dir, name, "devbox")
	})
	if release.err != nil {
		t.Fatalf("scripts/release: %v\n%s", release.err, release.log)
	}
	return release.bin, release.dir
}

// TestRelease: the linux/amd64 archive of scripts/release, as a user gets
// it: SHA256SUMS checks with sha256sum, the archive holds the binary and
// the README (owner 0, the commit's time), the binary is static and says
// its version and commit, the SBOM is CycloneDX and lists the modules
// devbox links. Then scripts/release --check builds linux/amd64 twice
// (another path, an empty Go build cache) and finds the same bytes.
func TestRelease(t *testing.T) {
	bin, dir := releaseBinary(t)
	t.Logf("scripts/release --targets linux/amd64: %.1f s", release.buildTime.Seconds())
	name := "devbox_" + release.version + "_linux_amd64"

	sums := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	sums.Dir = dir
	if out, err := sums.CombinedOutput(); err != nil || !strings.Contains(string(out), name+".tar.gz: OK") {
		t.Errorf("sha256sum --check SHA256SUMS: %v\n%s", err, out)
	}
	list, err := exec.Command("tar", "-tvzf", filepath.Join(dir, name+".tar.gz"), "--numeric-owner").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	commitTime, _ := exec.Command("git", "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%d %H:%M").Output()
	for _, want := range []string{name + "/devbox", name + "/README.md", "0/0", strings.TrimSpace(string(commitTime))} {
		if !strings.Contains(string(list), want) {
			t.Errorf("the archive lacks %q:\n%s", want, list)
		}
	}
	fi, _ := os.Stat(filepath.Join(dir, name+".tar.gz"))
	t.Logf("%s: %d bytes:\n%s", name+".tar.gz", fi.Size(), list)

	out, err := exec.Command(bin, "--version").CombinedOutput()
	head, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil || !strings.Contains(string(out), "devbox "+release.version+" (commit "+strings.TrimSpace(string(head))+")") {
		t.Errorf("%s --version: %v: %s (want version %s, commit %s)", bin, err, out, release.version, head)
	}
	if out, _ := exec.Command("file", bin).CombinedOutput(); len(out) > 0 && !strings.Contains(string(out), "statically linked") {
		t.Errorf("the binary is not static: %s", out)
	}
	if out, err := exec.Command("go", "version", "-m", bin).CombinedOutput(); err != nil || !strings.Contains(string(out), "CGO_ENABLED=0") || !strings.Contains(string(out), "-trimpath=true") {
		t.Errorf("go version -m: %v\n%s", err, out)
	}

	raw, err := os.ReadFile(filepath.Join(dir, name+".cdx.json"))
	if err != nil {
		t.Fatal(err)
	}
	var bom struct {
		BOMFormat    string `json:"bomFormat"`
		SerialNumber string `json:"serialNumber"`
		Metadata     struct {
			Timestamp string                `json:"timestamp"`
			Component struct{ Name string } `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name, Version, Purl string
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &bom); err != nil {
		t.Fatalf("the SBOM: %v", err)
	}
	mods := map[string]string{}
	for _, c := range bom.Components {
		mods[c.Name] = c.Version
	}
	if bom.BOMFormat != "CycloneDX" || bom.SerialNumber != "" || bom.Metadata.Timestamp != "" || bom.Metadata.Component.Name != "github.com/devbox-dev/devbox" {
		t.Errorf("SBOM: format %q serial %q timestamp %q main %q", bom.BOMFormat, bom.SerialNumber, bom.Metadata.Timestamp, bom.Metadata.Component.Name)
	}
	for _, m := range []string{"github.com/urfave/cli/v2", "github.com/miekg/dns", "github.com/moby/buildkit", "github.com/google/go-containerregistry"} {
		if !regexp.MustCompile(`^v\d`).MatchString(mods[m]) {
			t.Errorf("the SBOM does not list %s with a version (%q)", m, mods[m])
		}
	}
	t.Logf("SBOM: %d components, %d bytes", len(bom.Components), len(raw))

	start := time.Now()
	check, err := exec.Command("timeout", "25m", "../scripts/release", "--check", "--targets", "linux/amd64").CombinedOutput()
	if err != nil || !strings.Contains(string(check), "reproducible: 2 files, the same SHA-256 in both builds") {
		t.Fatalf("scripts/release --check: %v\n%s", err, check)
	}
	t.Logf("scripts/release --check --targets linux/amd64 (the second build with an empty GOCACHE): %.1f s\n%s", time.Since(start).Seconds(), check)
}
