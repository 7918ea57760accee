package devboxtest

import (
	"context"
	"net/http"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	bkclient "github.com/moby/buildkit/client"
)

// These tests check that every daemon scripts/services starts answers, so a
// broken setup fails CI loudly here rather than as odd failures elsewhere.

func TestServiceBuildkit(t *testing.T) {
	host := BuildkitHost(t)
	c, err := bkclient.New(context.Background(), host)
	if err != nil {
		t.Fatalf("buildkit client for %s: %v", host, err)
	}
	defer c.Close()
	ws, err := c.ListWorkers(context.Background())
	if err != nil {
		t.Fatalf("ListWorkers on %s: %v", host, err)
	}
	if len(ws) == 0 {
		t.Fatalf("buildkitd at %s has no worker", host)
	}
	var plats []string
	for _, w := range ws {
		for _, p := range w.Platforms {
			plats = append(plats, p.OS+"/"+p.Architecture)
		}
	}
	if !slices.Contains(plats, "linux/"+runtime.GOARCH) {
		t.Errorf("buildkitd workers support %v, want linux/%s", plats, runtime.GOARCH)
	}
}

func TestServiceRegistryAuth(t *testing.T) {
	reg := Env(t, "DEVBOX_REGISTRY")
	user := Env(t, "DEVBOX_REGISTRY_USER")
	pass := Env(t, "DEVBOX_REGISTRY_PASSWORD")
	tests := []struct {
		name       string
		user, pass string
		want       int
	}{
		{"anonymous", "", "", http.StatusUnauthorized},
		{"wrong password", user, pass + "x", http.StatusUnauthorized},
		{"credentials", user, pass, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", "http://"+reg+"/v2/", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("GET /v2/ on %s: %v", reg, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("GET /v2/ = %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

func TestServiceDockerConfigHoldsCredentials(t *testing.T) {
	reg := Env(t, "DEVBOX_REGISTRY")
	Env(t, "DOCKER_CONFIG")
	r, err := name.NewRegistry(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := authn.DefaultKeychain.Resolve(r)
	if err != nil {
		t.Fatalf("DefaultKeychain for %s: %v", reg, err)
	}
	cfg, err := a.Authorization()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Username != Env(t, "DEVBOX_REGISTRY_USER") || cfg.Password != Env(t, "DEVBOX_REGISTRY_PASSWORD") {
		t.Errorf("DOCKER_CONFIG gives user %q for %s, want DEVBOX_REGISTRY_USER with its password", cfg.Username, reg)
	}
}

func TestServiceBaseImage(t *testing.T) {
	ref, err := name.ParseReference(Env(t, "DEVBOX_BASE_IMAGE"))
	if err != nil {
		t.Fatalf("DEVBOX_BASE_IMAGE: %v", err)
	}
	if _, err := remote.Image(ref); err == nil {
		t.Errorf("anonymous pull of %s succeeded; the registry should require credentials", ref)
	}
	img, err := remote.Image(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		t.Fatalf("pull %s with DOCKER_CONFIG: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !slices.Equal(cf.Config.Cmd, []string{"/bin/bash"}) {
		t.Errorf("Cmd = %q, want [/bin/bash]", cf.Config.Cmd)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Errorf("%d layers, want 1", len(layers))
	}
}

func TestServiceDocker(t *testing.T) {
	d := DockerCLI(t)
	if v := d.Run(t, "version", "--format", "{{.Server.APIVersion}}"); v == "" {
		t.Fatalf("docker version printed no server API version for %s", d.Host)
	}
	base := Env(t, "DEVBOX_BASE_IMAGE")
	d.Run(t, "pull", "-q", base)
	got := d.Run(t, "run", "--rm", "--network", "none", base, "cat", "/etc/debian_version")
	if !strings.HasPrefix(got, "13.") {
		t.Errorf("/etc/debian_version in %s = %q, want trixie (13.x)", base, got)
	}
}

func TestServiceNodeTools(t *testing.T) {
	RequireE2E(t)
	tests := []struct{ env, want string }{
		{"DEVBOX_DEVCONTAINER_CLI", "0.89.0"},
		{"DEVBOX_SRT", "0.0.83"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			p := Env(t, tt.env)
			out, err := exec.Command(p, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", p, err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("%s --version = %q, want %q", p, got, tt.want)
			}
		})
	}
}
