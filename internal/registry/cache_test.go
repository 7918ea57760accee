package registry

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// The cache gives back what was stored under a key, keeps the newest keep
// images and removes the blobs nothing uses any more.
func TestCache(t *testing.T) {
	const keep = 4
	dir := t.TempDir()
	c, err := OpenCache(dir, keep)
	if err != nil {
		t.Fatal(err)
	}
	if img, err := c.Get("k0"); err != nil || img != nil {
		t.Fatalf("empty cache: get = %v, %v", img, err)
	}
	var imgs []v1.Image
	for i := 0; i <= keep; i++ {
		img, err := random.Image(256, 2)
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
		if err := c.Put("k"+string(rune('0'+i)), img, ""); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// k0 was last used long ago; the others are recent.
			old := time.Now().Add(-2 * CacheMinAge)
			if err := os.Chtimes(c.usedPath("k0"), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Reopened, as the next build would.
	c, err = OpenCache(dir, keep)
	if err != nil {
		t.Fatal(err)
	}
	if img, _ := c.Get("k0"); img != nil {
		t.Error("the least recently used image, unused for two hours, is still there past keep")
	}
	oldBlobs, _ := imageBlobs(imgs[0])
	for _, b := range oldBlobs {
		if _, err := os.Stat(c.blobPath(b.Digest)); err == nil {
			t.Errorf("blob %s of the dropped image is left", b.Digest)
		}
	}
	for i := 1; i <= keep; i++ {
		img, err := c.Get("k" + string(rune('0'+i)))
		if err != nil || img == nil {
			t.Fatalf("k%d: %v, %v", i, img, err)
		}
		want, _ := imgs[i].Digest()
		if got, _ := img.Digest(); got != want {
			t.Errorf("k%d: digest %s, stored %s", i, got, want)
		}
	}
	// One more past keep, but every image was used within the hour: all stay.
	defer func() {
		if img, _ := c.Get("k1"); img == nil {
			t.Error("an image used within CacheMinAge was dropped")
		}
	}()
	// Stored from an OCI layout, the blobs are linked, not copied.
	src := filepath.Join(t.TempDir(), "oci")
	img, _ := random.Image(256, 1)
	lp, err := layout.Write(src, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	if err := c.Put("linked", img, src); err != nil {
		t.Fatal(err)
	}
	lm, _ := img.Manifest()
	a, _ := os.Stat(filepath.Join(src, "blobs", "sha256", lm.Layers[0].Digest.Hex))
	b, err := os.Stat(c.blobPath(lm.Layers[0].Digest))
	if err != nil || !os.SameFile(a, b) {
		t.Errorf("the layer blob was not linked from the layout (%v)", err)
	}

	// A missing layer blob makes it a miss, not a broken image.
	last := "k" + string(rune('0'+keep))
	m, _ := imgs[keep].Manifest()
	if err := os.Remove(filepath.Join(dir, "blobs", "sha256", m.Layers[0].Digest.Hex)); err != nil {
		t.Fatal(err)
	}
	if img, err := c.Get(last); err != nil || img != nil {
		t.Errorf("get with a missing blob = %v, %v; want a miss", img, err)
	}
}
