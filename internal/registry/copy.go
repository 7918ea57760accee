package registry

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Built is an image read from an OCI layout: a single-platform image or a
// multi-platform index. Exactly one of Image and Index is set.
type Built struct {
	Image v1.Image
	Index v1.ImageIndex
	// Digest is the manifest (or index) digest, as stored: copying keeps it.
	Digest v1.Hash

	cleanup func()
}

// Close removes what Open unpacked.
func (b *Built) Close() {
	if b.cleanup != nil {
		b.cleanup()
	}
}

// Open reads a built image from an OCI layout directory or an OCI layout
// tarball (BuildKit's oci exporter output, `devbox build --output
// oci=DIR|TAR`). The layout must hold exactly one top-level manifest.
func Open(src string) (*Built, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, err
	}
	dir := src
	cleanup := func() {}
	if !fi.IsDir() {
		tmp, err := os.MkdirTemp("", "devbox-oci-")
		if err != nil {
			return nil, err
		}
		cleanup = func() { os.RemoveAll(tmp) }
		if err := untarLayout(src, tmp); err != nil {
			cleanup()
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		dir = tmp
	}
	b, err := openLayout(dir)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	b.cleanup = cleanup
	return b, nil
}

func openLayout(dir string) (*Built, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("not an OCI layout (no index.json/oci-layout): %w", err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("the layout holds %d manifests; devbox push copies a layout with exactly one image or index", len(m.Manifests))
	}
	d := m.Manifests[0]
	switch d.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		img, err := top.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		return &Built{Image: img, Digest: d.Digest}, nil
	case types.OCIImageIndex, types.DockerManifestList:
		idx, err := top.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		return &Built{Index: idx, Digest: d.Digest}, nil
	}
	return nil, fmt.Errorf("top-level manifest %s has media type %s, not an image or index", d.Digest, d.MediaType)
}

// untarLayout unpacks an OCI layout tarball into dir, refusing anything but
// regular files and directories inside dir.
func untarLayout(tarPath, dir string) error {
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the tarball: %w", err)
		}
		clean := path.Clean("/" + h.Name)
		if clean == "/" {
			continue
		}
		dst := filepath.Join(dir, filepath.FromSlash(clean))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected entry %q (type %c) in an OCI layout tarball", h.Name, h.Typeflag)
		}
	}
}

// Copy pushes b to dest ("host/repo", "host/repo:tag") and returns the
// pushed reference by digest. The manifest bytes are pushed as they are, so
// the digest is b's.
func Copy(ctx context.Context, b *Built, dest string, opts ...Option) (name.Digest, error) {
	o := collect(opts)
	ref, err := ParseReference(dest)
	if err != nil {
		return name.Digest{}, err
	}
	if _, ok := ref.(name.Digest); ok {
		return name.Digest{}, fmt.Errorf("destination %q: give a repository or a tag; the digest is the image's own", dest)
	}
	ro := o.remote(ctx)
	if b.Index != nil {
		err = remote.WriteIndex(ref, b.Index, ro...)
	} else {
		err = remote.Write(ref, b.Image, ro...)
	}
	if err != nil {
		return name.Digest{}, describe(dest, err)
	}
	return ref.Context().Digest(b.Digest.String()), nil
}

// Exists reports whether ref (by digest or tag) is in its registry. It is
// how tests prove that a failed build pushed nothing.
func Exists(ctx context.Context, ref string, opts ...Option) (bool, error) {
	o := collect(opts)
	r, err := ParseReference(ref)
	if err != nil {
		return false, err
	}
	_, err = remote.Head(r, o.remote(ctx)...)
	if err == nil {
		return true, nil
	}
	var te *transport.Error
	if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
		return false, nil
	}
	return false, describe(ref, err)
}

// Pull returns the image ref names, for the platform given ("linux/amd64")
// when ref is an index.
func Pull(ctx context.Context, ref, platform string, opts ...Option) (v1.Image, error) {
	o := collect(opts)
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	ro := o.remote(ctx)
	if platform != "" {
		p, err := v1.ParsePlatform(platform)
		if err != nil {
			return nil, err
		}
		ro = append(ro, remote.WithPlatform(*p))
	}
	img, err := remote.Image(r, ro...)
	if err != nil {
		return nil, describe(ref, err)
	}
	return img, nil
}
