package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"maps"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

func layerDigest(t *testing.T, files []TailFile, epoch time.Time) v1.Hash {
	t.Helper()
	l, err := TailLayer(files, epoch)
	if err != nil {
		t.Fatal(err)
	}
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The tail layer is a function of its files and the epoch alone: the same
// input gives the same digest, whatever the order, the clock or the user
// running the build; every entry is 0:0 and dated at the epoch.
func TestTailLayerDeterministic(t *testing.T) {
	epoch := time.Unix(1767225600, 0)
	files := []TailFile{
		{Path: "/etc/devbox/policy.json", Mode: 0o644, Data: []byte(`{"network":{}}` + "\n")},
		{Path: "/etc/claude-code/managed-settings.json", Mode: 0o644, Data: []byte(`{"env":{}}` + "\n")},
		{Path: "/usr/local/bin/tool", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
	}
	d1 := layerDigest(t, files, epoch)
	time.Sleep(1100 * time.Millisecond) // a gzip or tar header with the time in it would differ now
	reversed := slices.Clone(files)
	slices.Reverse(reversed)
	if d2 := layerDigest(t, reversed, epoch); d2 != d1 {
		t.Errorf("same files in another order: %s, then %s", d1, d2)
	}
	changed := slices.Clone(files)
	changed[0].Data = []byte(`{"network":{"allow":["a.test"]}}` + "\n")
	if layerDigest(t, changed, epoch) == d1 {
		t.Error("other content, same digest")
	}
	if layerDigest(t, files, epoch.Add(time.Second)) == d1 {
		t.Error("another epoch, same digest")
	}
	modes := slices.Clone(files)
	modes[2].Mode = 0o700
	if layerDigest(t, modes, epoch) == d1 {
		t.Error("another mode, same digest")
	}

	l, _ := TailLayer(files, epoch)
	if mt, _ := l.MediaType(); mt != types.OCILayer {
		t.Errorf("media type %s, want %s", mt, types.OCILayer)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header name %q time %v, want neither", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s owned by %d:%d (%q:%q), want 0:0 with no names", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if !h.ModTime.Equal(epoch) || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%s times %v/%v/%v, want mtime %v only", h.Name, h.ModTime, h.AccessTime, h.ChangeTime, epoch)
		}
		wantMode := int64(0o644)
		switch h.Name {
		case "usr/local/bin/tool":
			wantMode = 0o755
		case "etc/claude-code/", "etc/devbox/", "usr/local/bin/":
			wantMode = 0o755
			if h.Typeflag != tar.TypeDir {
				t.Errorf("%s is not a directory", h.Name)
			}
		}
		if h.Mode != wantMode {
			t.Errorf("%s mode %o, want %o", h.Name, h.Mode, wantMode)
		}
	}
	want := []string{"etc/claude-code/", "etc/claude-code/managed-settings.json", "etc/devbox/", "etc/devbox/policy.json", "usr/local/bin/", "usr/local/bin/tool"}
	if !slices.Equal(names, want) {
		t.Errorf("entries %q, want %q", names, want)
	}

	for _, bad := range [][]TailFile{
		{{Path: "/", Data: []byte("x")}},
		{{Path: "/etc/x", Data: []byte("a")}, {Path: "/etc/x", Data: []byte("b")}},
	} {
		if _, err := TailLayer(bad, epoch); err == nil {
			t.Errorf("TailLayer(%v) accepted", bad)
		}
	}
}

// testHeavy is a stand-in for the image BuildKit exports: OCI media types,
// two random layers, ConfigJSON's config.
func testHeavy(t *testing.T, spec Spec) v1.Image {
	t.Helper()
	cfgJSON, err := ConfigJSON(spec, []byte(`{"rootfs":{"diff_ids":[]}}`))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	// One layer per non-empty history entry, as BuildKit exports it.
	img, err := random.Image(512, int64(len(cf.History)))
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := img.Layers()
	heavy := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range layers {
		if heavy, err = mutate.Append(heavy, mutate.Addendum{Layer: l, MediaType: types.OCILayer}); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := heavy.ConfigFile()
	cf.RootFS = old.RootFS
	if heavy, err = mutate.ConfigFile(heavy, cf); err != nil {
		t.Fatal(err)
	}
	return heavy
}

func manifestOf(t *testing.T, img v1.Image) *v1.Manifest {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Assemble appends one layer to the heavy image and changes nothing else
// but the config (labels, the tail's history entry and diff ID) and the
// annotations; a network-only change gives another tail layer and config,
// and the same heavy layers.
func TestAssemble(t *testing.T) {
	spec := testSpec("2.1.332")
	heavy := testHeavy(t, spec)
	img, err := Assemble(heavy, spec, "0.1.0-test")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Assemble(heavy, spec, "0.1.0-test")
	d1, _ := img.Digest()
	if d2, _ := again.Digest(); d1 != d2 {
		t.Errorf("same heavy image and spec, digests %s and %s", d1, d2)
	}
	hm, m := manifestOf(t, heavy), manifestOf(t, img)
	if len(m.Layers) != len(hm.Layers)+1 || !slices.Equal(layerDigests(m)[:len(hm.Layers)], layerDigests(hm)) {
		t.Fatalf("layers %v, want the heavy image's %v and one more", m.Layers, hm.Layers)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Layers[len(m.Layers)-1].MediaType != types.OCILayer {
		t.Errorf("media types %s / %s, want OCI", m.MediaType, m.Layers[len(m.Layers)-1].MediaType)
	}
	if m.Annotations["org.opencontainers.image.base.digest"] != spec.Lock.Base.Digest {
		t.Errorf("annotations %v", m.Annotations)
	}
	cf, _ := img.ConfigFile()
	want, _ := Labels(spec, "0.1.0-test")
	if !maps.Equal(cf.Config.Labels, want) {
		t.Errorf("labels %v, want %v", cf.Config.Labels, want)
	}
	th, _ := TailHistory(spec)
	if last := cf.History[len(cf.History)-1]; last.CreatedBy != "[devbox] claude-settings + policy" || !last.Created.Time.Equal(Created(spec.Lock)) || last.EmptyLayer {
		t.Errorf("last history entry %+v, want %+v", last, th)
	}
	nonEmpty := 0
	for _, h := range cf.History {
		if !h.EmptyLayer {
			nonEmpty++
		}
	}
	if nonEmpty != len(cf.RootFS.DiffIDs) {
		t.Errorf("%d non-empty history entries for %d layers", nonEmpty, len(cf.RootFS.DiffIDs))
	}
	if cf.Config.User != "root" || !cf.Created.Time.Equal(Created(spec.Lock)) {
		t.Errorf("config user %q created %v", cf.Config.User, cf.Created)
	}

	// The policy file is in the tail layer.
	layers, _ := img.Layers()
	pj, _ := PolicyJSON(spec.Policy)
	found := LayerHolds(t, layers[len(layers)-1], layout.PolicyPath, pj)
	if !found {
		t.Errorf("%s with the normalized policy is not in the tail layer", layout.PolicyPath)
	}

	// A network-only change: the same heavy layers, another tail and config.
	net := testSpec("2.1.332")
	d, _ := policy.ParseDestination("registry.npmjs.org:443")
	net.Policy.Network.Allow = append(net.Policy.Network.Allow, d)
	img2, err := Assemble(heavy, net, "0.1.0-test")
	if err != nil {
		t.Fatal(err)
	}
	m2 := manifestOf(t, img2)
	n := len(m.Layers)
	if !slices.Equal(layerDigests(m2)[:n-1], layerDigests(m)[:n-1]) || m2.Layers[n-1].Digest == m.Layers[n-1].Digest || m2.Config.Digest == m.Config.Digest {
		t.Errorf("network-only change: layers %v → %v, config %s → %s; want only the last layer and the config to change",
			m.Layers, m2.Layers, m.Config.Digest, m2.Config.Digest)
	}
}

func layerDigests(m *v1.Manifest) []v1.Hash {
	var out []v1.Hash
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

func TestIndex(t *testing.T) {
	amd := testSpec("2.1.332")
	arm := testSpec("2.1.332")
	arm.Platform = "linux/arm64"
	arm.Lock.ClaudeCode.Platforms["linux/arm64"] = arm.Lock.ClaudeCode.Platforms["linux/amd64"]
	var imgs []v1.Image
	for _, s := range []Spec{amd, arm} {
		img, err := Assemble(testHeavy(t, s), s, "0.1.0-test")
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	idx, err := Index(imgs, []Spec{amd, arm}, "0.1.0-test")
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex || len(m.Manifests) != 2 || m.Annotations["org.opencontainers.image.base.digest"] == "" {
		t.Fatalf("index %+v", m)
	}
	for i, want := range []string{"linux/amd64", "linux/arm64/v8"} {
		d := m.Manifests[i]
		if d.Platform == nil || d.Platform.String() != want || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest %d: platform %v media type %s, want %s", i, d.Platform, d.MediaType, want)
		}
		if got, _ := imgs[i].Digest(); got != d.Digest {
			t.Errorf("manifest %d digest %s, image %s", i, d.Digest, got)
		}
	}
}

// LayerHolds reports whether layer l has the file path (absolute, as in
// the image) with exactly the bytes want. Exported for the e2e tests of
// package image_test, which check the policy layer of a pushed image.
func LayerHolds(t testing.TB, l v1.Layer, path string, want []byte) bool {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if "/"+h.Name == path {
			got, _ := io.ReadAll(tr)
			return bytes.Equal(got, want)
		}
	}
}
