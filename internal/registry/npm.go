package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/devbox-dev/devbox/internal/policy"
)

// DefaultNPMRegistry is used when $npm_config_registry is unset.
const DefaultNPMRegistry = "https://registry.npmjs.org/"

// NPMRegistry returns the npm registry URL devbox uses: $npm_config_registry
// (what npm itself honours) or DefaultNPMRegistry.
func NPMRegistry() string { return envOr("npm_config_registry", DefaultNPMRegistry) }

// npmVersion is the part of an npm version document devbox reads.
type npmVersion struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Dist    struct {
		Integrity string `json:"integrity"`
		Tarball   string `json:"tarball"`
	} `json:"dist"`
}

// NPMPackage reads the registry metadata of pkg at an exact version and
// returns its tarball URL and sha512 integrity. Nothing is downloaded but
// the metadata document; the tarball is fetched by the build, which checks
// it against this integrity.
func NPMPackage(ctx context.Context, registryURL, pkg, version string, opts ...Option) (policy.LockedPackage, error) {
	o := collect(opts)
	base := strings.TrimSuffix(registryURL, "/")
	// Scoped names keep their '@' and escape the '/': the form npm uses.
	u := base + "/" + strings.Replace(pkg, "/", "%2f", 1) + "/" + url.PathEscape(version)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return policy.LockedPackage{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Transport: o.transport}).Do(req)
	if err != nil {
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s: reading %s: %w", base, u, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s has no %s@%s", base, pkg, version)
	case resp.StatusCode != http.StatusOK:
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s: GET %s: %s", base, u, resp.Status)
	}
	var v npmVersion
	if err := json.Unmarshal(body, &v); err != nil {
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s: %s@%s: invalid metadata: %w", base, pkg, version, err)
	}
	if v.Name != pkg || v.Version != version {
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s: asked for %s@%s, got %s@%s", base, pkg, version, v.Name, v.Version)
	}
	if !strings.HasPrefix(v.Dist.Integrity, "sha512-") {
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s: %s@%s has no sha512 integrity (got %q); refusing to pin it", base, pkg, version, v.Dist.Integrity)
	}
	if v.Dist.Tarball == "" {
		return policy.LockedPackage{}, fmt.Errorf("npm registry %s: %s@%s has no tarball URL", base, pkg, version)
	}
	return policy.LockedPackage{Package: pkg, Tarball: v.Dist.Tarball, Integrity: v.Dist.Integrity}, nil
}
