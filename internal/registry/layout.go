package registry

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteLayout writes b into dir as an OCI layout whose index.json names b
// alone (the form Open reads and `devbox push` copies). Blobs already in dir
// are kept.
func WriteLayout(dir string, b *Built) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if b.Index != nil {
		return p.AppendIndex(b.Index)
	}
	return p.AppendImage(b.Image)
}

// WriteLayoutTar writes b to file as an OCI layout tarball: the layout of
// WriteLayout, entries in a fixed order with no owner names or times.
func WriteLayoutTar(file string, b *Built) error {
	tmp, err := os.MkdirTemp(filepath.Dir(file), ".devbox-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := WriteLayout(tmp, b); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == tmp {
			return err
		}
		rel, err := filepath.Rel(tmp, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Name += "/"
			h.Mode, h.Typeflag = 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", rel)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		fi, err := in.Stat()
		if err != nil {
			return err
		}
		h.Size = fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = io.Copy(tw, in)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
	}
	return err
}
