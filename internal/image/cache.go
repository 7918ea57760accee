package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/containerd/platforms"
	"github.com/moby/buildkit/client/llb"
	digest "github.com/opencontainers/go-digest"
)

// HeavyCacheKeep is how many heavy images the image cache keeps: the most
// recently stored ones. Their layers are stored once.
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
