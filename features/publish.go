package features

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Artifact builds the OCI image the Dev Containers CLI publishes for one
// file: config media type ConfigMediaType with content {}, one layer of
// layerType titled title, and the given manifest annotations.
func Artifact(data []byte, layerType types.MediaType, title string, annotations map[string]string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ConfigMediaType)
	// The config blob must be exactly {}: a v1.ConfigFile would marshal
	// rootfs and history fields the CLI never writes.
	img, err := mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(data, layerType),
		Annotations: map[string]string{TitleAnnotation: title},
	})
	if err != nil {
		return nil, err
	}
	return &rawConfig{Image: mutate.Annotations(img, annotations).(v1.Image)}, nil
}

// rawConfig replaces the config blob with {} and the manifest's config
// descriptor with one that points at it.
type rawConfig struct{ v1.Image }

var emptyConfig = []byte("{}")

func (r *rawConfig) RawConfigFile() ([]byte, error) { return emptyConfig, nil }
func (r *rawConfig) ConfigName() (v1.Hash, error) {
	h, _, err := v1.SHA256(strings.NewReader(string(emptyConfig)))
	return h, err
}
func (r *rawConfig) Manifest() (*v1.Manifest, error) {
	m, err := r.Image.Manifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	h, err := r.ConfigName()
	if err != nil {
		return nil, err
	}
	m.Config = v1.Descriptor{MediaType: ConfigMediaType, Size: int64(len(emptyConfig)), Digest: h}
	return m, nil
}

// RawManifest writes the manifest with the CLI's key order (digest before
// size, as the CLI's JSON.stringify does) so an artifact with the same
// content gets the same digest whichever tool pushed it.
func (r *rawConfig) RawManifest() ([]byte, error) {
	m, err := r.Manifest()
	if err != nil {
		return nil, err
	}
	out := cliManifest{SchemaVersion: m.SchemaVersion, MediaType: string(m.MediaType), Config: cliDescriptor(m.Config), Annotations: m.Annotations}
	for _, l := range m.Layers {
		out.Layers = append(out.Layers, cliDescriptor(l))
	}
	return marshalLikeJS(out, "")
}

// cliManifest is an OCI image manifest in the key order the Dev
// Containers CLI writes.
type cliManifest struct {
	SchemaVersion int64             `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        cliDesc           `json:"config"`
	Layers        []cliDesc         `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type cliDesc struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func cliDescriptor(d v1.Descriptor) cliDesc {
	return cliDesc{MediaType: string(d.MediaType), Digest: d.Digest.String(), Size: d.Size, Annotations: d.Annotations}
}
func (r *rawConfig) Digest() (v1.Hash, error) {
	b, err := r.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	h, _, err := v1.SHA256(strings.NewReader(string(b)))
	return h, err
}
func (r *rawConfig) Size() (int64, error) {
	b, err := r.RawManifest()
	return int64(len(b)), err
}

// githubPackageType is the annotation the CLI adds when publishing to ghcr.io.
const githubPackageType = "com.github.package.type"

// Tags returns the tags a version is published under: X, X.Y, X.Y.Z and
// latest.
func Tags(version string) ([]string, error) {
	m := semver.FindStringSubmatch(version)
	if m == nil {
		return nil, fmt.Errorf("version %q is not X.Y.Z", version)
	}
	return []string{m[1], m[1] + "." + m[2], version, "latest"}, nil
}

// Published is the result of Publish.
type Published struct {
	Feature    name.Digest
	Tags       []string // tags moved to this version
	Skipped    []string // tags left on a newer version
	Collection name.Digest
}

// Publish pushes the feature package to NAMESPACE/ID under Tags(version),
// never moving a tag that already points at a newer version, and the
// collection metadata to NAMESPACE:latest, like `devcontainer features
// publish`.
func Publish(ctx context.Context, namespace string, m *Manifest, tarball, collection []byte, opts ...remote.Option) (*Published, error) {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	repo, err := name.NewRepository(strings.TrimSuffix(namespace, "/") + "/" + m.ID)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", namespace, err)
	}
	annotations := map[string]string{MetadataAnnotation: string(m.Raw)}
	// Like the CLI, mark the package type only on GitHub's registry, which
	// reads it; anywhere else the manifest carries the metadata alone.
	colAnnotations := map[string]string(nil)
	if repo.RegistryStr() == "ghcr.io" {
		annotations[githubPackageType] = "devcontainer_feature"
		colAnnotations = map[string]string{githubPackageType: "devcontainer_collection"}
	}
	img, err := Artifact(tarball, LayerMediaType, TarballName(m.ID), annotations)
	if err != nil {
		return nil, err
	}
	tags, err := Tags(m.Version)
	if err != nil {
		return nil, err
	}
	out := &Published{}
	for _, tag := range tags {
		ref := repo.Tag(tag)
		newer, err := newerAt(ref, m.Version, opts)
		if err != nil {
			return nil, err
		}
		if newer != "" {
			out.Skipped = append(out.Skipped, tag+" (at "+newer+")")
			continue
		}
		if err := remote.Write(ref, img, opts...); err != nil {
			return nil, fmt.Errorf("pushing %s: %w", ref, err)
		}
		out.Tags = append(out.Tags, tag)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	out.Feature = repo.Digest(d.String())

	nsRepo, err := name.NewRepository(strings.TrimSuffix(namespace, "/"))
	if err != nil {
		return nil, err
	}
	col, err := Artifact(collection, CollectionMediaType, CollectionFile, colAnnotations)
	if err != nil {
		return nil, err
	}
	if err := remote.Write(nsRepo.Tag("latest"), col, opts...); err != nil {
		return nil, fmt.Errorf("pushing the collection to %s: %w", nsRepo, err)
	}
	cd, err := col.Digest()
	if err != nil {
		return nil, err
	}
	out.Collection = nsRepo.Digest(cd.String())
	return out, nil
}

// newerAt returns the version ref points at when it is newer than version,
// "" when the tag is free or older.
func newerAt(ref name.Tag, version string, opts []remote.Option) (string, error) {
	desc, err := remote.Get(ref, opts...)
	var terr *transport.Error
	if errors.As(err, &terr) && terr.StatusCode == 404 {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", ref, err)
	}
	var mf v1.Manifest
	if err := jsonUnmarshal(desc.Manifest, &mf); err != nil {
		return "", fmt.Errorf("%s: %w", ref, err)
	}
	var meta struct{ Version string }
	if err := jsonUnmarshal([]byte(mf.Annotations[MetadataAnnotation]), &meta); err != nil {
		return "", fmt.Errorf("%s: no readable %s annotation: refusing to overwrite what is there", ref, MetadataAnnotation)
	}
	if compareVersions(meta.Version, version) > 0 {
		return meta.Version, nil
	}
	return "", nil
}

func compareVersions(a, b string) int {
	pa, pb := semver.FindStringSubmatch(a), semver.FindStringSubmatch(b)
	if pa == nil || pb == nil {
		return strings.Compare(a, b)
	}
	for i := 1; i <= 3; i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			if x > y {
				return 1
			}
			return -1
		}
	}
	return 0
}
