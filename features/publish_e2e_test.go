package features

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// featureSource writes a --source tree for `devbox feature` with the root
// manifest at version.
func featureSource(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	m := bytes.Replace(rootManifest(t), []byte(`"version": "0.1.0"`), []byte(`"version": "`+version+`"`), 1)
	if !bytes.Contains(m, []byte(`"version": "`+version+`"`)) {
		t.Fatal(`the root manifest has no "version": "0.1.0" line to replace`)
	}
	install, err := os.ReadFile("src/devbox/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "features", "src", "devbox"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "features", "src", "devbox", "install.sh"), install, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPublishCommand runs `devbox feature publish` against the local
// registry with its htpasswd credentials coming only from DOCKER_CONFIG:
// the digest it prints is the one the registry serves for every tag, and
// publishing 1.2.2 after 1.2.3 adds 1.2.2 but leaves 1, 1.2 and latest on
// 1.2.3.
func TestPublishCommand(t *testing.T) {
	devboxtest.RequireE2E(t)
	reg := devboxtest.Env(t, "DEVBOX_REGISTRY")
	devboxtest.Env(t, "DOCKER_CONFIG")
	devbox := devboxtest.BuildDevbox(t)
	ns := fmt.Sprintf("%s/feature-cli/t%d", reg, time.Now().UnixNano())

	publish := func(version string) (digest string, out string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, devbox, "feature", "publish", "--source", featureSource(t, version), ns)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("devbox feature publish %s: %v\n%s%s", version, err, stdout.Bytes(), stderr.Bytes())
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		last := lines[len(lines)-1]
		ref, err := name.NewDigest(last)
		if err != nil {
			t.Fatalf("last line %q is not a digest reference: %v\n%s", last, err, stdout.Bytes())
		}
		if ref.Context().String() != ns+"/devbox" {
			t.Errorf("printed %s, want a digest in %s/devbox", ref, ns)
		}
		t.Logf("publish %s:\n%s", version, stdout.Bytes())
		return ref.DigestStr(), stdout.String()
	}
	at := func(tag string) string {
		t.Helper()
		ref, err := name.NewTag(ns+"/devbox:"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		d, err := remote.Head(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		return d.Digest.String()
	}

	d123, out := publish("1.2.3")
	if !strings.Contains(out, "tags 1, 1.2, 1.2.3, latest\n") {
		t.Errorf("1.2.3 output does not list the four tags:\n%s", out)
	}
	for _, tag := range []string{"1", "1.2", "1.2.3", "latest"} {
		if got := at(tag); got != d123 {
			t.Errorf("tag %s at %s, printed %s", tag, got, d123)
		}
	}

	d122, out := publish("1.2.2")
	if d122 == d123 {
		t.Fatalf("1.2.2 and 1.2.3 have the same digest %s", d122)
	}
	for _, kept := range []string{"1", "1.2", "latest"} {
		if !strings.Contains(out, "kept tag "+kept+" (at 1.2.3)") {
			t.Errorf("1.2.2 output does not report keeping %s:\n%s", kept, out)
		}
		if got := at(kept); got != d123 {
			t.Errorf("tag %s moved backwards to %s (1.2.3 is %s, 1.2.2 is %s)", kept, got, d123, d122)
		}
	}
	if got := at("1.2.2"); got != d122 {
		t.Errorf("tag 1.2.2 at %s, printed %s", got, d122)
	}
}
