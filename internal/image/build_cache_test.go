package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moby/buildkit/client"

	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

// With the heavy image in the image cache, Build asks BuildKit for nothing:
// no client, and Connect is never called. The image is the heavy image
// with the tail appended, written to the output; a network-only change
// gives another digest the same way; a heavy image not in the cache dials
// BuildKit.
func TestBuildFromCacheNeedsNoDaemon(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "devbox")
	if err := os.WriteFile(bin, []byte("a devbox binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(policy.ClaudeCodeNone)
	sum, err := fileSum(bin)
	if err != nil {
		t.Fatal(err)
	}
	keyed := spec
	keyed.BinaryDigest = sum
	key, err := HeavyKey(ctx, keyed, false)
	if err != nil {
		t.Fatal(err)
	}
	heavy := testHeavy(t, keyed)
	cacheDir := filepath.Join(dir, "cache")
	cache, err := registry.OpenCache(cacheDir, HeavyCacheKeep)
	if err != nil {
		t.Fatal(err)
	}
	if err := cache.Put(key, heavy, ""); err != nil {
		t.Fatal(err)
	}

	dialled := 0
	noDaemon := errors.New("no BuildKit daemon here")
	build := func(s Spec, out string) (*Result, error) {
		return Build(ctx, nil, BuildOptions{
			Specs:         []Spec{s},
			DevboxVersion: "0.1.0-test",
			Binaries:      map[string]string{"linux/amd64": bin},
			CacheDir:      cacheDir,
			OCIDir:        out,
			Connect: func(context.Context) (*client.Client, error) {
				dialled++
				return nil, noDaemon
			},
		})
	}
	res, err := build(spec, filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Assemble(heavy, spec, "0.1.0-test")
	wd, _ := want.Digest()
	hd, _ := heavy.Digest()
	if res.Digest != wd.String() || !res.HeavyFromCache || len(res.Heavy) != 1 || res.Heavy[0] != hd.String() || dialled != 0 {
		t.Errorf("build from the cache: digest %s (want %s), heavy from the cache %v %v, BuildKit dialled %d times",
			res.Digest, wd, res.HeavyFromCache, res.Heavy, dialled)
	}
	b, err := registry.Open(filepath.Join(dir, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	if b.Digest.String() != res.Digest {
		t.Errorf("the OCI layout holds %s, Build said %s", b.Digest, res.Digest)
	}

	net := testSpec(policy.ClaudeCodeNone)
	d, _ := policy.ParseDestination("registry.npmjs.org:443")
	net.Policy.Network.Allow = append(net.Policy.Network.Allow, d)
	res2, err := build(net, filepath.Join(dir, "oci2"))
	if err != nil || res2.Digest == res.Digest || !res2.HeavyFromCache || dialled != 0 {
		t.Errorf("network-only change: %v, digest %s (was %s), BuildKit dialled %d times", err, res2.Digest, res.Digest, dialled)
	}

	// Another binary is another heavy image: BuildKit is needed.
	if err := os.WriteFile(bin, []byte("another devbox binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := build(spec, filepath.Join(dir, "oci3")); !errors.Is(err, noDaemon) || dialled != 1 {
		t.Errorf("a heavy image not in the cache: %v after %d dials, want the dial's error", err, dialled)
	}
}
