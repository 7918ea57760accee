package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gofrs/flock"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
)

// Cache is a store of images by key: an OCI layout directory whose
// index.json names each image by its key (annotation CacheKeyAnnotation),
// keeping the most recently used ones and each blob once. devbox keeps
// its heavy images there (image.HeavyKey), which is what lets a policy edit
// skip BuildKit's export. A file lock serializes the processes sharing
// one.
type Cache struct {
	p    layout.Path
	lock *flock.Flock
	keep int
}

// CacheKeyAnnotation names, in a Cache's index.json, the key an image was
// stored under.
const CacheKeyAnnotation = "dev.devbox.cache.key"

// OpenCache opens the cache in dir, creating it when missing; it keeps the
// keep most recently used images, and any used within CacheMinAge.
func OpenCache(dir string, keep int) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	c := &Cache{lock: flock.New(filepath.Join(dir, ".lock")), keep: keep}
	if err := c.lock.Lock(); err != nil {
		return nil, fmt.Errorf("image cache %s: %w", dir, err)
	}
	defer c.lock.Unlock()
	p, err := layout.FromPath(dir)
	if err != nil {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return nil, fmt.Errorf("image cache %s: %w", dir, err)
		}
	}
	c.p = p
	return c, nil
}

// Get returns the image stored for key, or nil when there is none or one of
// its blobs is missing or cut short.
func (c *Cache) Get(key string) (v1.Image, error) {
	if err := c.lock.Lock(); err != nil {
		return nil, err
	}
	defer c.lock.Unlock()
	idx, err := c.p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Annotations[CacheKeyAnnotation] != key {
			continue
		}
		img, err := c.p.Image(d.Digest)
		if err != nil {
			return nil, nil
		}
		blobs, err := imageBlobs(img)
		if err != nil {
			return nil, nil
		}
		for _, b := range blobs {
			// A blob cut short (a build killed while storing it) is a miss.
			if fi, err := os.Stat(c.blobPath(b.Digest)); err != nil || (b.Size >= 0 && fi.Size() != b.Size) {
				return nil, nil
			}
		}
		c.touch(key)
		return img, nil
	}
	return nil, nil
}

// Put stores img under key, replacing what was stored for it, then keeps
// only the newest images and removes the blobs no image left uses. from,
// when not "", is the OCI layout img was read from: its blobs are
// hard-linked into the cache rather than copied when they can be (a heavy
// image is hundreds of MB).
func (c *Cache) Put(key string, img v1.Image, from string) error {
	if err := c.lock.Lock(); err != nil {
		return err
	}
	defer c.lock.Unlock()
	if from != "" {
		c.link(from)
	}
	if err := c.p.ReplaceImage(img, match.Annotation(CacheKeyAnnotation, key),
		layout.WithAnnotations(map[string]string{CacheKeyAnnotation: key})); err != nil {
		return fmt.Errorf("image cache %s: storing an image: %w", c.p, err)
	}
	c.touch(key)
	return c.prune(c.keep)
}

// prune keeps the keep most recently used images and those used within
// CacheMinAge, and removes every blob none of them uses.
func (c *Cache) prune(keep int) error {
	idx, err := c.p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	// The keep most recently used stay, and so does whatever was used
	// within CacheMinAge: another build may be pushing it right now.
	entries := slices.Clone(m.Manifests)
	usedAt := func(d v1.Descriptor) time.Time { return c.usedAt(d.Annotations[CacheKeyAnnotation]) }
	slices.SortStableFunc(entries, func(a, b v1.Descriptor) int { return usedAt(b).Compare(usedAt(a)) })
	stay := map[v1.Hash]bool{}
	for i, d := range entries {
		if i < keep || time.Since(usedAt(d)) < CacheMinAge {
			stay[d.Digest] = true
		}
	}
	var drop []v1.Hash
	for _, d := range entries {
		if !stay[d.Digest] && !slices.Contains(drop, d.Digest) {
			drop = append(drop, d.Digest)
			os.Remove(c.usedPath(d.Annotations[CacheKeyAnnotation]))
		}
	}
	if len(drop) > 0 {
		if err := c.p.RemoveDescriptors(match.Digests(drop...)); err != nil {
			return err
		}
		if idx, err = c.p.ImageIndex(); err != nil {
			return err
		}
		if m, err = idx.IndexManifest(); err != nil {
			return err
		}
	}
	used := map[v1.Hash]bool{}
	for _, d := range m.Manifests {
		img, err := c.p.Image(d.Digest)
		if err != nil {
			return err
		}
		blobs, err := imageBlobs(img)
		if err != nil {
			return err
		}
		for _, b := range blobs {
			used[b.Digest] = true
		}
	}
	dir := filepath.Join(string(c.p), "blobs")
	return filepath.WalkDir(dir, func(file string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		alg := filepath.Base(filepath.Dir(file))
		h, err := v1.NewHash(alg + ":" + d.Name())
		if err != nil || used[h] {
			return nil // not a blob of ours, or in use
		}
		return os.Remove(file)
	})
}

// link hard-links the blobs of the OCI layout in dir that the cache lacks.
// Whatever it cannot link, ReplaceImage copies.
func (c *Cache) link(dir string) {
	root := filepath.Join(dir, "blobs")
	filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, file)
		if err != nil {
			return nil
		}
		dst := filepath.Join(string(c.p), "blobs", rel)
		if _, err := os.Stat(dst); err == nil {
			return nil
		}
		if os.MkdirAll(filepath.Dir(dst), 0o755) == nil {
			os.Link(file, dst)
		}
		return nil
	})
}

// CacheMinAge is how long after its last use an image stays in a Cache
// whatever the count: long enough for any build that got it to push it.
const CacheMinAge = time.Hour

// usedPath is the file whose time says when key was last stored or got.
func (c *Cache) usedPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(string(c.p), "used", hex.EncodeToString(sum[:16]))
}

func (c *Cache) usedAt(key string) time.Time {
	fi, err := os.Stat(c.usedPath(key))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// touch records that key was used now.
func (c *Cache) touch(key string) {
	f := c.usedPath(key)
	if os.MkdirAll(filepath.Dir(f), 0o755) == nil {
		os.WriteFile(f, nil, 0o644)
		now := time.Now()
		os.Chtimes(f, now, now)
	}
}

func (c *Cache) blobPath(h v1.Hash) string {
	return filepath.Join(string(c.p), "blobs", h.Algorithm, h.Hex)
}

// blob is a blob's digest and size (-1: not known).
type blob struct {
	Digest v1.Hash
	Size   int64
}

// imageBlobs lists the blobs of img: manifest, config and layers.
func imageBlobs(img v1.Image) ([]blob, error) {
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	out := []blob{{d, -1}, {m.Config.Digest, m.Config.Size}}
	for _, l := range m.Layers {
		out = append(out, blob{l.Digest, l.Size})
	}
	return out, nil
}
