// Package registry is how devbox moves images, through
// go-containerregistry: it resolves references to digests (auth from the
// Docker config keychain), reads and writes built images as OCI layout
// directories or tarballs and copies them to registries keeping their
// digest, keeps images by key in a local Cache, loads image tarballs into a
// Docker engine, and reads npm registry metadata to
// pin Claude Code. The Dev Container Feature, an OCI artifact rather than
// an image, is pushed by package features, which calls
// go-containerregistry itself.
package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Option configures registry access.
type Option func(*options)

type options struct {
	keychain  authn.Keychain
	transport http.RoundTripper
}

// WithKeychain sets where credentials come from. The default is
// authn.DefaultKeychain: $DOCKER_CONFIG/config.json (or ~/.docker) and its
// credential helpers.
func WithKeychain(k authn.Keychain) Option { return func(o *options) { o.keychain = k } }

// WithTransport sets the HTTP transport (tests). The default is
// remote.DefaultTransport.
func WithTransport(t http.RoundTripper) Option { return func(o *options) { o.transport = t } }

func collect(opts []Option) options {
	o := options{keychain: authn.DefaultKeychain, transport: remote.DefaultTransport}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func (o options) remote(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(o.keychain), remote.WithTransport(o.transport)}
}

// ParseReference parses an image reference ("host/repo:tag",
// "host/repo@sha256:…").
// Plain HTTP is spoken only to loopback registries ("localhost",
// "127.0.0.1"), go-containerregistry's own rule.
func ParseReference(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	return r, nil
}

// Resolve returns the digest ref points to in its registry: the manifest
// list (index) digest for a multi-platform image, so one lock serves every
// platform. A reference that already has a digest is checked to exist.
func Resolve(ctx context.Context, ref string, opts ...Option) (name.Digest, error) {
	o := collect(opts)
	r, err := ParseReference(ref)
	if err != nil {
		return name.Digest{}, err
	}
	desc, err := remote.Head(r, o.remote(ctx)...)
	if err != nil {
		// Some registries refuse HEAD; GET says the same thing.
		var gd *remote.Descriptor
		gd, gerr := remote.Get(r, o.remote(ctx)...)
		if gerr != nil {
			return name.Digest{}, describe(ref, gerr)
		}
		desc = &gd.Descriptor
	}
	return r.Context().Digest(desc.Digest.String()), nil
}

// describe turns registry errors into messages that say what to do.
func describe(ref string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%s: the registry refused the credentials (check `docker login` or $DOCKER_CONFIG/config.json): %w", ref, err)
		case http.StatusNotFound:
			return fmt.Errorf("%s: not found in the registry: %w", ref, err)
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("%s: cannot reach its registry: %w\n"+
			"  check the network (HTTPS_PROXY is honoured), or point image.base at a mirror you can reach (your team's registry), then run the command again", ref, err)
	}
	return fmt.Errorf("%s: %w", ref, err)
}
