package devcontainer_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

func TestDetectBase(t *testing.T) {
	tests := []struct {
		files   []string
		want    string
		why     string
		whyAlso string
	}{
		{nil, policy.DefaultBase, "no package.json", ""},
		{[]string{"package.json"}, devcontainer.NodeBase, "package.json found", ""},
		{[]string{"pyproject.toml"}, devcontainer.PythonBase, "pyproject.toml found", ""},
		{[]string{"requirements.txt"}, devcontainer.PythonBase, "requirements.txt found", ""},
		{[]string{"go.mod"}, devcontainer.GoBase, "go.mod found", ""},
		{[]string{"go.mod", "package.json"}, devcontainer.NodeBase, "package.json found", "Also go.mod found"},
		{[]string{"sub/package.json"}, policy.DefaultBase, "no package.json", ""},
	}
	for _, tt := range tests {
		root := t.TempDir()
		for _, f := range tt.files {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b := devcontainer.DetectBase(root)
		if b.Ref != tt.want || !strings.HasPrefix(b.Why, tt.why) || !strings.Contains(b.Why, tt.whyAlso) {
			t.Errorf("files %v: DetectBase = %+v, want %s because %q… %q", tt.files, b, tt.want, tt.why, tt.whyAlso)
		}
		if _, err := policy.Parse("p", []byte(`{"image": {"base": "`+b.Ref+`"}}`)); err != nil {
			t.Errorf("%s does not validate: %v", b.Ref, err)
		}
	}
}

// redirect sends every registry request to the in-memory registry at host,
// so the official names (docker.io/library/node:…) resolve offline.
type redirect struct{ host string }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL = &url.URL{Scheme: "http", Host: r.host, Path: req.URL.Path, RawQuery: req.URL.RawQuery}
	req.Host = r.host
	return http.DefaultTransport.RoundTrip(req)
}

// Each base init can choose resolves, under its official name, to the
// index digest: the lock pins the multi-platform index, so one lock builds
// amd64 and arm64.
func TestDetectedBasesLock(t *testing.T) {
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	tr := redirect{host}
	for _, ref := range []string{policy.DefaultBase, devcontainer.NodeBase, devcontainer.PythonBase, devcontainer.GoBase} {
		idx := twoPlatformIndex(t)
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(r, idx, remote.WithTransport(tr), remote.WithAuth(authn.Anonymous)); err != nil {
			t.Fatal(err)
		}
		want, _ := idx.Digest()
		d, err := registry.Resolve(context.Background(), ref, registry.WithTransport(tr), registry.WithKeychain(authn.NewMultiKeychain()))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if d.DigestStr() != want.String() {
			t.Errorf("%s resolved to %s, want the index %s", ref, d.DigestStr(), want)
		}
		if !strings.HasPrefix(d.String(), "index.docker.io/library/") {
			t.Errorf("%s resolved as %s: not the official repository", ref, d)
		}
	}
}

func twoPlatformIndex(t *testing.T) v1.ImageIndex {
	t.Helper()
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := idx.IndexManifest()
	var adds []mutate.IndexAddendum
	for i, arch := range []string{"amd64", "arm64"} {
		img, err := idx.Image(m.Manifests[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return mutate.AppendManifests(mutate.RemoveManifests(idx, func(v1.Descriptor) bool { return true }), adds...)
}
