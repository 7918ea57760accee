package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/platforms"
	"github.com/gofrs/flock"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/moby/buildkit/client/llb"
	digest "github.com/opencontainers/go-digest"
)

// heavyKeyAnnotation names, in the cache's index.json, the key a heavy
// image was built for.
const heavyKeyAnnotation = "dev.devbox.heavy.key"

// HeavyCacheKeep is how many heavy images the cache keeps: the most
// recently stored ones. Their layers are shared where they are the same.
const HeavyCacheKeep = 4

// heavyFormat changes whenever what devbox puts in the heavy image changes
// without the graph changing (its config), so an old cache entry is never
// taken for a new one.
const heavyFormat = "devbox heavy image v1"

// HeavyKey returns the cache key of spec's heavy image: a digest of
// everything it is made of, the LLB graph of Graph(spec) (every op's
// digest: the base by digest, the packages, the user, the Claude Code
// tarball and its sha512, the scripts, the epoch in each step's
// environment), the devbox binary's content (spec.BinaryDigest), and how
// it is exported (the timestamp rewrite). The network policy is in none of
// them.
func HeavyKey(ctx context.Context, spec Spec, keepTimestamps bool) (string, error) {
	if spec.BinaryDigest == "" {
		return "", errors.New("image: no digest of the devbox binary to key the heavy image by")
	}
	st, err := Graph(spec)
	if err != nil {
		return "", err
	}
	p, err := platforms.Parse(spec.Platform)
	if err != nil {
		return "", err
	}
	def, err := st.Marshal(ctx, llb.Platform(platforms.Normalize(p)))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00%t\x00", heavyFormat, spec.Platform, spec.Lock.SourceDateEpoch, spec.BinaryDigest, keepTimestamps)
	for _, dt := range def.Def {
		fmt.Fprintf(h, "%s\x00", digest.FromBytes(dt))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fileSum is the sha256 of a file's content.
func fileSum(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("devbox binary: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("devbox binary: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// heavyCache is devbox's store of heavy images: an OCI layout directory
// whose index.json names each image by its HeavyKey. It is what lets a
// policy edit skip BuildKit's export, whose timestamp rewrite reads every
// layer again (most of a cached build's time). A file lock serializes the
// devbox processes sharing it.
type heavyCache struct {
	p    layout.Path
	lock *flock.Flock
}

// openHeavyCache opens (creating it when missing) the cache in dir.
func openHeavyCache(dir string) (*heavyCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("image cache: %w", err)
	}
	c := &heavyCache{lock: flock.New(filepath.Join(dir, ".lock"))}
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

// get returns the heavy image stored for key, or nil when there is none or
// one of its blobs is missing.
func (c *heavyCache) get(key string) (v1.Image, error) {
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
		if d.Annotations[heavyKeyAnnotation] != key {
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
		return img, nil
	}
	return nil, nil
}

// put stores img under key, replacing what was stored for it, then keeps
// only the HeavyCacheKeep newest images and removes the blobs no image
// left uses. from, when not "", is the OCI layout img was read from: its
// blobs are hard-linked into the cache rather than copied when they can be
// (the heavy image is hundreds of MB).
func (c *heavyCache) put(key string, img v1.Image, from string) error {
	if err := c.lock.Lock(); err != nil {
		return err
	}
	defer c.lock.Unlock()
	if from != "" {
		c.link(from)
	}
	if err := c.p.ReplaceImage(img, match.Annotation(heavyKeyAnnotation, key),
		layout.WithAnnotations(map[string]string{heavyKeyAnnotation: key})); err != nil {
		return fmt.Errorf("image cache: storing the heavy image: %w", err)
	}
	return c.prune(HeavyCacheKeep)
}

// prune keeps the keep newest entries of the index (ReplaceImage appends)
// and removes every blob none of them uses.
func (c *heavyCache) prune(keep int) error {
	idx, err := c.p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if n := len(m.Manifests); n > keep {
		old := map[v1.Hash]bool{}
		for _, d := range m.Manifests[:n-keep] {
			old[d.Digest] = true
		}
		for _, d := range m.Manifests[n-keep:] {
			delete(old, d.Digest) // stored again under another key
		}
		drop := make([]v1.Hash, 0, len(old))
		for h := range old {
			drop = append(drop, h)
		}
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
func (c *heavyCache) link(dir string) {
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

func (c *heavyCache) blobPath(h v1.Hash) string {
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

// CacheDir is where `devbox build` keeps heavy images by default: the
// user's cache directory's devbox/images ($XDG_CACHE_HOME, else
// ~/.cache).
func CacheDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", errors.New("no cache directory: set DEVBOX_CACHE_DIR or give --cache-dir")
	}
	return filepath.Join(d, "devbox", "images"), nil
}
