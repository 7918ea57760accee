package registry

import (
	"archive/tar"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func newRegistry(t *testing.T, auth bool) string {
	t.Helper()
	var h http.Handler = ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	if auth {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "devbox" || p != "secret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t, true)
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := ParseReference(host + "/base:bookworm")
	good := WithKeychain(staticKeychain{authn.FromConfig(authn.AuthConfig{Username: "devbox", Password: "secret"})})
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "devbox", Password: "secret"})); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()

	d, err := Resolve(ctx, host+"/base:bookworm", good)
	if err != nil {
		t.Fatal(err)
	}
	if d.DigestStr() != want.String() || d.Context().String() != host+"/base" {
		t.Errorf("Resolve = %s, want %s/base@%s", d, host, want)
	}

	tests := []struct {
		name, ref string
		opt       Option
		want      string
	}{
		{"wrong password", host + "/base:bookworm",
			WithKeychain(staticKeychain{authn.FromConfig(authn.AuthConfig{Username: "devbox", Password: "nope"})}), "refused the credentials"},
		{"anonymous", host + "/base:bookworm", WithKeychain(staticKeychain{authn.Anonymous}), "refused the credentials"},
		{"missing tag", host + "/base:trixie", good, "not found"},
		{"missing digest", host + "/base@sha256:" + strings.Repeat("0", 64), good, "not found"},
		{"bad reference", "UPPER/Case::x", good, "image reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Resolve(ctx, tt.ref, tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Resolve(%s) = %v, want an error containing %q", tt.ref, err, tt.want)
			}
		})
	}
}

type staticKeychain struct{ a authn.Authenticator }

func (k staticKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return k.a, nil }

func TestNPMPackage(t *testing.T) {
	const integrity = "sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw=="
	docs := map[string]string{
		"/@anthropic-ai%2fclaude-code-linux-x64/2.1.332": `{"name":"@anthropic-ai/claude-code-linux-x64","version":"2.1.332",
			"dist":{"integrity":"` + integrity + `","shasum":"6b05","tarball":"https://npm.test/x.tgz"}}`,
		"/@anthropic-ai%2fclaude-code-linux-x64/1.0.0": `{"name":"@anthropic-ai/claude-code-linux-x64","version":"1.0.0",
			"dist":{"shasum":"6b05","tarball":"https://npm.test/old.tgz"}}`,
		"/@anthropic-ai%2fclaude-code-linux-x64/2.0.0": `{"name":"@anthropic-ai/claude-code-linux-x64","version":"2.0.1",
			"dist":{"integrity":"` + integrity + `","tarball":"https://npm.test/y.tgz"}}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, ok := docs[r.URL.EscapedPath()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, d)
	}))
	defer srv.Close()
	ctx := context.Background()
	p, err := NPMPackage(ctx, srv.URL+"/", "@anthropic-ai/claude-code-linux-x64", "2.1.332")
	if err != nil {
		t.Fatal(err)
	}
	if p.Integrity != integrity || p.Tarball != "https://npm.test/x.tgz" || p.Package != "@anthropic-ai/claude-code-linux-x64" {
		t.Errorf("NPMPackage = %+v", p)
	}
	for _, tt := range []struct{ version, want string }{
		{"9.9.9", "has no @anthropic-ai/claude-code-linux-x64@9.9.9"},
		{"1.0.0", "no sha512 integrity"},
		{"2.0.0", "got @anthropic-ai/claude-code-linux-x64@2.0.1"},
	} {
		if _, err := NPMPackage(ctx, srv.URL, "@anthropic-ai/claude-code-linux-x64", tt.version); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NPMPackage(%s) = %v, want %q", tt.version, err, tt.want)
		}
	}
}

func TestNPMRegistryEnv(t *testing.T) {
	t.Setenv("npm_config_registry", "")
	if got := NPMRegistry(); got != DefaultNPMRegistry {
		t.Errorf("NPMRegistry() = %s", got)
	}
	t.Setenv("npm_config_registry", "http://127.0.0.1:4873/")
	if got := NPMRegistry(); got != "http://127.0.0.1:4873/" {
		t.Errorf("NPMRegistry() = %s", got)
	}
}

// Copy from an OCI layout (directory and tarball) keeps the digest, for a
// single image and for an index.
func TestOpenCopy(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t, false)
	img, _ := random.Image(2048, 3)
	idx, _ := random.Index(512, 1, 2)

	for _, tt := range []struct {
		name  string
		write func(p layout.Path) error
	}{
		{"image", func(p layout.Path) error { return p.AppendImage(img) }},
		{"index", func(p layout.Path) error { return p.AppendIndex(idx) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p, err := layout.Write(dir, empty.Index)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.write(p); err != nil {
				t.Fatal(err)
			}
			tarPath := filepath.Join(t.TempDir(), "image.tar")
			if err := tarDir(dir, tarPath); err != nil {
				t.Fatal(err)
			}
			for _, src := range []string{dir, tarPath} {
				b, err := Open(src)
				if err != nil {
					t.Fatal(err)
				}
				d, err := Copy(ctx, b, host+"/copied/"+tt.name+":v1")
				b.Close()
				if err != nil {
					t.Fatal(err)
				}
				if d.DigestStr() != b.Digest.String() {
					t.Errorf("Copy(%s) pushed %s, layout digest %s", src, d, b.Digest)
				}
				got, err := Resolve(ctx, host+"/copied/"+tt.name+":v1")
				if err != nil || got.DigestStr() != b.Digest.String() {
					t.Errorf("registry has %v (%v), want %s", got, err, b.Digest)
				}
			}
		})
	}

	t.Run("two manifests", func(t *testing.T) {
		dir := t.TempDir()
		p, _ := layout.Write(dir, empty.Index)
		p.AppendImage(img)
		other, _ := random.Image(10, 1)
		p.AppendImage(other)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "2 manifests") {
			t.Errorf("Open(two manifests) = %v", err)
		}
	})
	t.Run("not a layout", func(t *testing.T) {
		if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not an OCI layout") {
			t.Errorf("Open(empty dir) = %v", err)
		}
	})
	t.Run("digest destination", func(t *testing.T) {
		dir := t.TempDir()
		p, _ := layout.Write(dir, empty.Index)
		p.AppendImage(img)
		b, _ := Open(dir)
		defer b.Close()
		if _, err := Copy(ctx, b, host+"/x@sha256:"+strings.Repeat("a", 64)); err == nil || !strings.Contains(err.Error(), "give a repository or a tag") {
			t.Errorf("Copy to a digest = %v", err)
		}
	})
}

func TestExists(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t, false)
	img, _ := random.Image(10, 1)
	ref, _ := ParseReference(host + "/e:1")
	remote.Write(ref, img)
	for ref, want := range map[string]bool{host + "/e:1": true, host + "/e:2": false, host + "/nope:1": false} {
		got, err := Exists(ctx, ref)
		if err != nil || got != want {
			t.Errorf("Exists(%s) = %v, %v; want %v", ref, got, err, want)
		}
	}
}

func TestLoadDocker(t *testing.T) {
	var got []byte
	sock := filepath.Join(t.TempDir(), "docker.sock")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/images/load" || r.Header.Get("Content-Type") != "application/x-tar" {
			http.Error(w, "bad request "+r.URL.Path, http.StatusBadRequest)
			return
		}
		got, _ = io.ReadAll(r.Body)
		if string(got) == "broken" {
			io.WriteString(w, `{"errorDetail":{"message":"unexpected EOF"},"error":"unexpected EOF"}`+"\n")
			return
		}
		io.WriteString(w, `{"stream":"Loaded image: devbox:latest\n"}`+"\n")
	}))
	l, err := netListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	msg, err := LoadDocker(context.Background(), "unix://"+sock, strings.NewReader("tarball"))
	if err != nil || msg != "Loaded image: devbox:latest" || string(got) != "tarball" {
		t.Errorf("LoadDocker = %q, %v (engine got %q)", msg, err, got)
	}
	if _, err := LoadDocker(context.Background(), "unix://"+sock, strings.NewReader("broken")); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("LoadDocker(broken) = %v", err)
	}
	if _, err := LoadDocker(context.Background(), "ssh://host", strings.NewReader("")); err == nil || !strings.Contains(err.Error(), "only unix://") {
		t.Errorf("LoadDocker(ssh) = %v", err)
	}
	if _, err := LoadDocker(context.Background(), "unix://"+filepath.Join(t.TempDir(), "none.sock"), strings.NewReader("")); err == nil || !strings.Contains(err.Error(), "is dockerd running") {
		t.Errorf("LoadDocker(no daemon) = %v", err)
	}
}

func netListenUnix(path string) (net.Listener, error) { return net.Listen("unix", path) }

// tarDir writes dir as a tarball, the way BuildKit's oci exporter does.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// A registry nobody answers for says what to do, not only the dial error.
func TestResolveUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = Resolve(context.Background(), addr+"/base:bookworm", WithKeychain(staticKeychain{authn.Anonymous}))
	if err == nil || !strings.Contains(err.Error(), "cannot reach its registry") || !strings.Contains(err.Error(), "image.base at a mirror") {
		t.Errorf("Resolve on a closed port: %v", err)
	}
}
