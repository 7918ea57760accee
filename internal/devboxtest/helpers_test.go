package devboxtest

import (
	"debug/elf"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestNewRegistryRoundTrip(t *testing.T) {
	host := NewRegistry(t)
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("NewRegistry = %q, want a 127.0.0.1 address", host)
	}
	ref, err := name.ParseReference(host + "/test/img:v1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push: %v", err)
	}
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	want, _ := img.Digest()
	if d, _ := got.Digest(); d != want {
		t.Errorf("pulled digest %s, pushed %s", d, want)
	}
}

func TestReplace(t *testing.T) {
	v := "before"
	t.Run("inner", func(t *testing.T) {
		Replace(t, &v, "during")
		if v != "during" {
			t.Errorf("inside: v = %q, want during", v)
		}
	})
	if v != "before" {
		t.Errorf("after cleanup: v = %q, want before", v)
	}
}

func TestDockerEnv(t *testing.T) {
	tests := []struct {
		name, outer string
	}{
		{"unset", ""},
		{"overrides the system daemon", "unix:///var/run/docker.sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.outer != "" {
				t.Setenv("DOCKER_HOST", tt.outer)
			}
			env := Docker{Path: "docker", Host: "unix:///tmp/test.sock"}.Env()
			var hosts []string
			for _, kv := range env {
				if v, ok := strings.CutPrefix(kv, "DOCKER_HOST="); ok {
					hosts = append(hosts, v)
				}
			}
			if !slices.Equal(hosts, []string{"unix:///tmp/test.sock"}) {
				t.Errorf("DOCKER_HOST entries = %q, want exactly the test daemon", hosts)
			}
		})
	}
}

func TestBuildDevbox(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/devbox")
	}
	p := BuildDevbox(t)
	if again := BuildDevbox(t); again != p {
		t.Errorf("second BuildDevbox = %q, want the cached %q", again, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&0o111 == 0 {
		t.Fatalf("%s is not executable (mode %v)", p, fi.Mode())
	}
	out, err := exec.Command(p, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", p, err, out)
	}
	if !strings.Contains(string(out), "devbox") {
		t.Errorf("%s --help does not mention devbox:\n%s", p, out)
	}
}

// TestBuildDevboxArm64 builds the linux/arm64 devbox that e2e/multiarch
// bakes into its arm64 image (scripts/test runs it first, at low
// priority, to warm the build cache) and checks it is an arm64 ELF.
func TestBuildDevboxArm64(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/devbox for linux/arm64")
	}
	p := BuildDevboxFor(t, "arm64")
	if !strings.HasSuffix(p, "devbox-linux-arm64") {
		t.Fatalf("BuildDevboxFor(arm64) = %s: not its own path (the host build is …/devbox)", p)
	}
	f, err := elf.Open(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		t.Errorf("%s is built for %v, want EM_AARCH64", p, f.Machine)
	}
}

// TestSyncBuffer: writes from several goroutines all land, whole, and the
// buffer can be read while they write (run with -race to check the lock).
func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.Write([]byte("ab"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("ab", 800) {
		t.Errorf("SyncBuffer holds %d bytes, want 1600 of \"ab\" repeated", len(got))
	}
}
