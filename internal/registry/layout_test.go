package registry

import (
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// What WriteLayout and WriteLayoutTar write, Open reads back with the same
// digest: `devbox build --output` then `devbox push` keeps the image's
// digest.
func TestWriteLayoutRoundTrip(t *testing.T) {
	img, err := random.Image(256, 2)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	imgDigest, _ := img.Digest()
	idxDigest, _ := idx.Digest()
	for _, tc := range []struct {
		name string
		b    *Built
		want v1.Hash
	}{
		{"image", &Built{Image: img}, imgDigest},
		{"index", &Built{Index: idx}, idxDigest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, out := range []string{filepath.Join(dir, "layout"), filepath.Join(dir, "layout.tar")} {
				var err error
				if filepath.Ext(out) == ".tar" {
					err = WriteLayoutTar(out, tc.b)
				} else {
					err = WriteLayout(out, tc.b)
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := Open(out)
				if err != nil {
					t.Fatal(err)
				}
				if got.Digest != tc.want || (got.Index != nil) != (tc.b.Index != nil) {
					t.Errorf("%s: read back %s (index %v), wrote %s", out, got.Digest, got.Index != nil, tc.want)
				}
				got.Close()
			}
			// Written twice into the same directory: still one image.
			if err := WriteLayout(filepath.Join(dir, "layout"), tc.b); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(filepath.Join(dir, "layout")); err != nil {
				t.Errorf("a layout written twice: %v", err)
			}
		})
	}
}
