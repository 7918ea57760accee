package devboxtest

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// NewRegistry starts go-containerregistry's in-memory registry on loopback
// for the length of tb and returns its host:port. It needs no daemon and no
// DEVBOX_E2E; it has no auth (use DEVBOX_REGISTRY for the htpasswd one).
func NewRegistry(tb testing.TB) string {
	tb.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	tb.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// BuildkitHost returns the address of the test buildkitd
// (DEVBOX_BUILDKIT_HOST), gating tb on DEVBOX_E2E.
func BuildkitHost(tb testing.TB) string {
	tb.Helper()
	return Env(tb, "DEVBOX_BUILDKIT_HOST")
}

// Replace sets *target to val for the length of tb and restores it after.
func Replace[T any](tb testing.TB, target *T, val T) {
	tb.Helper()
	old := *target
	*target = val
	tb.Cleanup(func() { *target = old })
}

// PushRandom pushes a small random image to ref (on a NewRegistry host) and
// returns its digest ("sha256:…"): a base image for tests that lock or pull.
func PushRandom(tb testing.TB, ref string) string {
	tb.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		tb.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		tb.Fatalf("push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		tb.Fatal(err)
	}
	return d.String()
}
