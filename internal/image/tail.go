package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image is built in two parts, as ko builds its application layer:
//
//   - the heavy image, every step but the tail (Graph): BuildKit builds it,
//     rewrites its file times to the lock's epoch once, and devbox keeps it
//     in its cache (heavyCache) under a key of everything it is made of;
//   - the tail, the files that follow from the policy (Step.Tail): devbox
//     writes them as one deterministic layer (TailLayer) and sets the
//     labels, history and annotations itself (Assemble).
//
// A policy edit changes only the tail, so it never reaches BuildKit: no
// step runs, no layer is exported or rewritten again, and a push uploads
// the new layer, config and manifest (a few kilobytes).

// TailFile is one file of the tail layer.
type TailFile struct {
	// Path is absolute ("/etc/devbox/policy.json").
	Path string
	Mode os.FileMode
	Data []byte
}

// tailSteps returns spec's tail steps, in build order.
func tailSteps(spec Spec) ([]Step, error) {
	steps, err := Steps(spec)
	if err != nil {
		return nil, err
	}
	var tail []Step
	for _, s := range steps {
		if s.Tail {
			if s.Dest == "" || s.Data == nil || !path.IsAbs(s.Dest) {
				return nil, fmt.Errorf("tail step %s writes no file", s.Name)
			}
			tail = append(tail, s)
		}
	}
	if len(tail) == 0 {
		return nil, errors.New("image: no tail step (the policy is always one)")
	}
	return tail, nil
}

// TailFiles returns the files of spec's tail layer: the policy, the
// baseline with --baseline, Claude Code's managed settings when Claude Code
// is in the image.
func TailFiles(spec Spec) ([]TailFile, error) {
	steps, err := tailSteps(spec)
	if err != nil {
		return nil, err
	}
	files := make([]TailFile, 0, len(steps))
	for _, s := range steps {
		files = append(files, TailFile{Path: s.Dest, Mode: s.Mode, Data: s.Data})
	}
	return files, nil
}

// TailLayer returns the layer holding files and their parent directories
// (mode 0755), as an OCI gzip layer whose bytes depend on nothing but files
// and epoch: entries sorted by name, owned by 0:0 with no user or group
// names, every time the epoch, each file's mode its own, and a gzip header
// with no name or time. So the same policy gives the same layer digest on
// any machine, with no timestamp rewrite.
func TailLayer(files []TailFile, epoch time.Time) (v1.Layer, error) {
	type entry struct {
		name string
		mode os.FileMode
		data []byte
		dir  bool
	}
	var entries []entry
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimPrefix(path.Clean(f.Path), "/")
		if name == "" || name == "." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("tail file %q: not a file path", f.Path)
		}
		if seen[name] {
			return nil, fmt.Errorf("tail file %s given twice", f.Path)
		}
		seen[name] = true
		entries = append(entries, entry{name: name, mode: f.Mode.Perm(), data: f.Data})
		if dir := path.Dir(name); dir != "." && !seen[dir+"/"] {
			seen[dir+"/"] = true
			entries = append(entries, entry{name: dir + "/", mode: 0o755, dir: true})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })

	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: int64(e.mode), ModTime: epoch.UTC(), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := gz.Bytes()
	// Given compressed bytes, go-containerregistry keeps them as the blob
	// (its own compression could change with its version).
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// TailHistory is the history entry of spec's tail layer: one layer for all
// the tail steps, named after them.
func TailHistory(spec Spec) (v1.History, error) {
	steps, err := tailSteps(spec)
	if err != nil {
		return v1.History{}, err
	}
	names := make([]string, len(steps))
	for i, s := range steps {
		names[i] = s.Name
	}
	return v1.History{Created: v1.Time{Time: Created(spec.Lock)}, CreatedBy: VertexPrefix + strings.Join(names, " + "), Comment: "devbox"}, nil
}

// Assemble returns spec's image: heavy (the image of Graph(spec), as
// BuildKit exported it with ConfigJSON's config) with the tail layer
// appended, its history entry added, the labels set and the OCI annotations
// on the manifest. It depends on nothing but heavy, spec and devboxVersion.
func Assemble(heavy v1.Image, spec Spec, devboxVersion string) (v1.Image, error) {
	files, err := TailFiles(spec)
	if err != nil {
		return nil, err
	}
	layer, err := TailLayer(files, Created(spec.Lock))
	if err != nil {
		return nil, err
	}
	h, err := TailHistory(spec)
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(heavy, mutate.Addendum{Layer: layer, History: h, MediaType: types.OCILayer})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("the heavy image's config: %w", err)
	}
	cf = cf.DeepCopy()
	if cf.Config.Labels, err = Labels(spec, devboxVersion); err != nil {
		return nil, err
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, Annotations(spec, devboxVersion)).(v1.Image), nil
}

// Index returns the multi-platform index of imgs, built from specs (the
// same order), with the OCI annotations.
func Index(imgs []v1.Image, specs []Spec, devboxVersion string) (v1.ImageIndex, error) {
	if len(imgs) != len(specs) || len(imgs) == 0 {
		return nil, fmt.Errorf("image: %d images for %d platforms", len(imgs), len(specs))
	}
	adds := make([]mutate.IndexAddendum, len(imgs))
	for i, img := range imgs {
		p, err := v1.ParsePlatform(specs[i].Platform)
		if err != nil {
			return nil, err
		}
		if p.Architecture == "arm64" && p.Variant == "" {
			p.Variant = "v8"
		}
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}}
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, Annotations(specs[0], devboxVersion)).(v1.ImageIndex), nil
}
