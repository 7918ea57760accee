package image

import (
	"context"
	"crypto/sha256"
	cryptotls "crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/platforms"
	"github.com/docker/cli/cli/config"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/buildkit/client"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/exporter/containerimage/exptypes"
	gateway "github.com/moby/buildkit/frontend/gateway/client"
	"github.com/moby/buildkit/session"
	"github.com/moby/buildkit/session/auth/authprovider"
	"github.com/moby/buildkit/util/progress/progressui"
	"github.com/tonistiigi/fsutil"
	"golang.org/x/sync/errgroup"

	"github.com/devbox-dev/devbox/internal/registry"

	// Registers docker-container:// for BUILDKIT_HOST.
	_ "github.com/moby/buildkit/client/connhelper/dockercontainer"
)

// DefaultBuildkitHost is the BuildKit address used when BUILDKIT_HOST is
// unset: where a rootful buildkitd listens by default.
const DefaultBuildkitHost = "unix:///run/buildkit/buildkitd.sock"

// TLS holds the client certificates for a tcp:// BuildKit daemon.
type TLS struct {
	CACert, Cert, Key string
	// ServerName overrides the name checked in the daemon's certificate.
	ServerName string
}

// Connect dials BuildKit at addr and checks that a daemon answers, so a
// missing daemon is reported here, once, with what to do about it.
func Connect(ctx context.Context, addr string, tls TLS) (*client.Client, error) {
	var opts []client.ClientOpt
	if tls.CACert != "" || tls.Cert != "" || tls.Key != "" {
		if !strings.HasPrefix(addr, "tcp://") {
			return nil, fmt.Errorf("--tlscacert/--tlscert/--tlskey need a tcp:// BuildKit address, not %s", addr)
		}
		if tls.CACert != "" {
			opts = append(opts, client.WithServerConfig(tls.ServerName, tls.CACert))
		}
		if tls.Cert != "" || tls.Key != "" {
			if tls.Cert == "" || tls.Key == "" {
				return nil, errors.New("--tlscert and --tlskey go together")
			}
			opts = append(opts, client.WithCredentials(tls.Cert, tls.Key))
		}
	}
	c, err := client.New(ctx, addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("BuildKit at %s: %w", addr, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Info(pctx); err != nil {
		c.Close()
		if tls.CACert != "" || tls.Cert != "" {
			// A client certificate the daemon refuses shows up in gRPC as a
			// broken pipe (TLS 1.3 rejects it after the handshake): ask the
			// daemon directly what it thinks of ours.
			if perr := probeTLS(addr, tls); perr != nil {
				err = perr
			}
		}
		if tlsFailure(err) {
			return nil, fmt.Errorf("BuildKit at %s refused the TLS handshake: %v\n"+
				"  check that --tlscacert (or BUILDKIT_TLS_CACERT) is the CA that signed the daemon's certificate (buildkitd --tlscert),\n"+
				"  and that --tlscert/--tlskey are a client certificate signed by the CA the daemon trusts (buildkitd --tlscacert)", addr, err)
		}
		return nil, fmt.Errorf("no BuildKit daemon answers at %s: %v\n"+
			"  start one (as root: `buildkitd`, listening on %s),\n"+
			"  or run it in Docker: `docker run -d --privileged --name buildkitd moby/buildkit:v0.34.2` and set BUILDKIT_HOST=docker-container://buildkitd,\n"+
			"  or point BUILDKIT_HOST (or --buildkit-host) at a daemon you have", addr, err, DefaultBuildkitHost)
	}
	return c, nil
}

// probeTLS makes one TLS connection to the tcp:// daemon at addr with the
// client's certificates and waits briefly for the daemon's verdict, which
// TLS 1.3 sends after the handshake. It returns the TLS error, or nil when
// the daemon accepted the connection (or another error than TLS's).
func probeTLS(addr string, t TLS) error {
	host := strings.TrimPrefix(addr, "tcp://")
	cfg := &cryptotls.Config{ServerName: t.ServerName, MinVersion: cryptotls.VersionTLS12, NextProtos: []string{"h2"}}
	if cfg.ServerName == "" {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			return nil
		}
		cfg.ServerName = h
	}
	if t.CACert != "" {
		pem, err := os.ReadFile(t.CACert)
		if err != nil {
			return fmt.Errorf("--tlscacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tlscacert %s: no PEM certificate in it", t.CACert)
		}
	}
	if t.Cert != "" && t.Key != "" {
		c, err := cryptotls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return fmt.Errorf("--tlscert/--tlskey: %w", err)
		}
		cfg.Certificates = []cryptotls.Certificate{c}
	}
	conn, err := cryptotls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", host, cfg)
	if err != nil {
		if tlsFailure(err) {
			return err
		}
		return nil
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil && tlsFailure(err) {
		return err
	}
	return nil
}

// tlsFailure reports whether err is a failed TLS handshake (a certificate
// one side does not trust, or none where one is required), which gRPC
// reports only as text.
func tlsFailure(err error) bool {
	m := err.Error()
	for _, s := range []string{"tls:", "x509:", "certificate", "handshake"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// BuildOptions says what to build and where the result goes.
type BuildOptions struct {
	// Specs has one Spec per target platform, all for the same policy and
	// lock. More than one builds a multi-platform index.
	Specs []Spec
	// DevboxVersion is stamped into labels.
	DevboxVersion string
	// Binaries maps each platform to a linux devbox binary for it.
	Binaries map[string]string

	// Push lists references to push to ("host/repo:tag"). Pushing happens
	// only when the whole build succeeded.
	Push []string
	// OCIDir writes an OCI layout directory; OCITar an OCI layout tarball.
	OCIDir, OCITar string
	// Load streams the image into a Docker engine through LoadFunc, tagged
	// LoadName.
	LoadName string
	LoadFunc func(ctx context.Context, r io.Reader) (string, error)

	CacheFrom, CacheTo []client.CacheOptionsEntry

	// CacheDir is devbox's cache of heavy images (see HeavyKey): a build
	// whose heavy image is there does not ask BuildKit for it. "" builds
	// it with BuildKit every time.
	CacheDir string
	// Connect dials BuildKit when Build is given no client and needs one
	// (a heavy image not in CacheDir, or CacheTo): a policy edit then
	// builds with no daemon at all. Build closes the client it got.
	Connect func(context.Context) (*client.Client, error)

	// KeepTimestamps skips rewriting the heavy layers' file times to the
	// lock's SOURCE_DATE_EPOCH. The rewrite makes a build from an empty
	// cache give the same layers; it costs a pass over every layer (about
	// half a minute for the default image) each time BuildKit exports the
	// heavy image, which CacheDir makes once per heavy image.
	KeepTimestamps bool

	// Progress is the progressui mode (auto, tty, plain, rawjson, quiet);
	// ProgressOut where it is written (stderr).
	Progress    string
	ProgressOut io.Writer
}

// Vertex is one build step as BuildKit reported it.
type Vertex struct {
	Name   string
	Cached bool
	// Duration is how long the step ran (0 when cached).
	Duration time.Duration
}

// Result is what a build produced.
type Result struct {
	// Digest is the image manifest digest, or the index digest for a
	// multi-platform build.
	Digest string
	// Pushed lists each pushed reference by digest ("host/repo@sha256:…").
	Pushed []string
	// Loaded is what the Docker engine said.
	Loaded string
	// Vertices are the build steps in the order they completed.
	Vertices []Vertex
	// Elapsed is the wall time of the build, outputs included.
	Elapsed time.Duration
	// HeavyFromCache is true when every platform's heavy image came from
	// CacheDir: BuildKit built and exported nothing.
	HeavyFromCache bool
	// Heavy is each platform's heavy image digest, in Specs order.
	Heavy []string

	stepNames map[string]bool
}

// Steps returns the vertices of devbox's run and copy steps (not the
// sources: the base, the download, the binary and policy content are
// re-checked on every build and never report "cached"), one per name.
func (r *Result) Steps() []Vertex {
	seen := map[string]bool{}
	var out []Vertex
	for _, v := range r.Vertices {
		if r.stepNames[v.Name] && !seen[v.Name] {
			seen[v.Name] = true
			out = append(out, v)
		}
	}
	return out
}

// LocalBinaryName is the LLB local source holding the devbox binary for
// platform.
func LocalBinaryName(platform string) string {
	return LocalBinary + "-" + strings.ReplaceAll(platform, "/", "-")
}

// Build makes the image of every spec and writes it to each output. c may
// be nil when o.Connect is set. The
// heavy image of each spec (Graph) comes from CacheDir when it holds one
// for its HeavyKey; the others are solved together against c and exported
// once into the cache. Then each platform's tail is appended (Assemble).
// Build checks the specs first and the daemon's platforms before solving,
// and writes outputs only after everything built: a failing step (a wrong
// Claude Code checksum, a missing base digest) pushes nothing.
func Build(ctx context.Context, c *client.Client, o BuildOptions) (*Result, error) {
	start := time.Now()
	plats, err := checkOptions(o)
	if err != nil {
		return nil, err
	}
	o.Specs = slices.Clone(o.Specs)
	keys := make([]string, len(o.Specs))
	for i := range o.Specs {
		spec := &o.Specs[i]
		if spec.BinaryDigest, err = fileSum(o.Binaries[spec.Platform]); err != nil {
			return nil, err
		}
		if keys[i], err = HeavyKey(ctx, *spec, o.KeepTimestamps); err != nil {
			return nil, err
		}
	}
	var cache *registry.Cache
	if o.CacheDir != "" {
		if cache, err = registry.OpenCache(o.CacheDir, HeavyCacheKeep); err != nil {
			return nil, err
		}
	}
	heavy := make([]v1.Image, len(o.Specs))
	var missing []int
	for i := range o.Specs {
		if cache != nil {
			if heavy[i], err = cache.Get(keys[i]); err != nil {
				return nil, fmt.Errorf("image cache %s: %w", o.CacheDir, err)
			}
		}
		if heavy[i] == nil {
			missing = append(missing, i)
		}
	}
	res := &Result{HeavyFromCache: len(missing) == 0}
	if len(missing) > 0 || len(o.CacheTo) > 0 {
		// With --cache-to and every heavy image cached, the solve only
		// exports BuildKit's cache (every step is a cache hit).
		tmp, err := os.MkdirTemp(o.CacheDir, "devbox-heavy-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if c == nil {
			if o.Connect == nil {
				return nil, errors.New("image: no BuildKit client and no Connect")
			}
			if c, err = o.Connect(ctx); err != nil {
				return nil, err
			}
			defer c.Close()
		}
		built, rec, err := solveHeavy(ctx, c, o, plats, missing, tmp)
		if err != nil {
			return nil, err
		}
		r := rec.result()
		res.Vertices, res.stepNames = r.Vertices, r.stepNames
		for _, i := range missing {
			img := built[o.Specs[i].Platform]
			if cache != nil {
				if err := cache.Put(keys[i], img, tmp); err != nil {
					return nil, err
				}
				if img, err = cache.Get(keys[i]); err != nil || img == nil {
					return nil, fmt.Errorf("image cache %s: the heavy image just stored is not there (%v)", o.CacheDir, err)
				}
			}
			heavy[i] = img
		}
	}

	imgs := make([]v1.Image, len(o.Specs))
	for i, spec := range o.Specs {
		d, err := heavy[i].Digest()
		if err != nil {
			return nil, err
		}
		res.Heavy = append(res.Heavy, d.String())
		if imgs[i], err = Assemble(heavy[i], spec, o.DevboxVersion); err != nil {
			return nil, fmt.Errorf("appending the policy layer for %s: %w", spec.Platform, err)
		}
	}
	out := &registry.Built{Image: imgs[0]}
	if len(imgs) > 1 {
		out = &registry.Built{}
		if out.Index, err = Index(imgs, o.Specs, o.DevboxVersion); err != nil {
			return nil, err
		}
		out.Digest, err = out.Index.Digest()
	} else {
		out.Digest, err = out.Image.Digest()
	}
	if err != nil {
		return nil, err
	}
	res.Digest = out.Digest.String()
	if err := writeOutputs(ctx, o, out, res); err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// solveHeavy builds the heavy images of the specs at missing (none: only
// the cache exports) against c in one solve, exports them as an OCI layout
// into dir, and returns them by platform, read from there.
func solveHeavy(ctx context.Context, c *client.Client, o BuildOptions, plats map[string]llb.ConstraintsOpt,
	missing []int, dir string) (map[string]v1.Image, *recorder, error) {
	specs := make([]Spec, 0, len(missing))
	for _, i := range missing {
		specs = append(specs, o.Specs[i])
	}
	solveSpecs := specs
	if len(solveSpecs) == 0 {
		solveSpecs = o.Specs
	}
	if err := checkPlatforms(ctx, c, solveSpecs); err != nil {
		return nil, nil, err
	}
	sub := o
	sub.Specs = solveSpecs
	bins := map[string]string{}
	for _, s := range solveSpecs {
		bins[s.Platform] = o.Binaries[s.Platform]
	}
	sub.Binaries = bins
	locals, cleanup, err := binarySources(bins)
	if err != nil {
		return nil, nil, err
	}
	defer cleanup()
	var exports []client.ExportEntry
	if len(specs) > 0 {
		a := exportAttrs(o)
		a["tar"] = "false"
		exports = append(exports, client.ExportEntry{Type: client.ExporterOCI, Attrs: a, OutputDir: dir})
	}
	display, err := newDisplay(o.Progress, o.ProgressOut)
	if err != nil {
		return nil, nil, err
	}
	rec, err := newRecorder(solveSpecs)
	if err != nil {
		return nil, nil, err
	}
	if _, err := solve(ctx, c, solveOptions(sub, exports, locals), gatewayBuild(sub, plats), display, rec); err != nil {
		return nil, nil, err
	}
	if len(specs) == 0 {
		return nil, rec, nil
	}
	built, err := readHeavy(dir, specs)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the image BuildKit exported: %w", err)
	}
	return built, rec, nil
}

// readHeavy reads the images of specs from the OCI layout BuildKit
// exported into dir: one image, or an index with one per platform.
func readHeavy(dir string, specs []Spec) (map[string]v1.Image, error) {
	b, err := registry.Open(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]v1.Image{}
	if b.Image != nil {
		if len(specs) != 1 {
			return nil, fmt.Errorf("one image for %d platforms", len(specs))
		}
		out[specs[0].Platform] = b.Image
		return out, nil
	}
	m, err := b.Index.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		img, err := b.Index.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		out[d.Platform.OS+"/"+d.Platform.Architecture] = img
	}
	for _, s := range specs {
		if out[s.Platform] == nil {
			return nil, fmt.Errorf("no image for %s", s.Platform)
		}
	}
	return out, nil
}

// writeOutputs writes the built image to every output o asks for: the
// registry references, the OCI layout directory or tarball, the Docker
// engine.
func writeOutputs(ctx context.Context, o BuildOptions, b *registry.Built, res *Result) error {
	for _, ref := range o.Push {
		d, err := registry.Copy(ctx, b, ref)
		if err != nil {
			return fmt.Errorf("pushing: %w", err)
		}
		res.Pushed = append(res.Pushed, d.String())
	}
	if o.OCIDir != "" {
		if err := registry.WriteLayout(o.OCIDir, b); err != nil {
			return fmt.Errorf("--output oci=%s: %w", o.OCIDir, err)
		}
	}
	if o.OCITar != "" {
		if err := registry.WriteLayoutTar(o.OCITar, b); err != nil {
			return fmt.Errorf("--output oci=%s: %w", o.OCITar, err)
		}
	}
	if o.LoadFunc != nil {
		tag, err := name.NewTag(o.LoadName)
		if err != nil {
			return fmt.Errorf("--load: %w", err)
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarball.Write(tag, b.Image, pw)) }()
		msg, err := o.LoadFunc(ctx, pr)
		pr.CloseWithError(err)
		if err != nil {
			return fmt.Errorf("--load: %w", err)
		}
		res.Loaded = msg
	}
	return nil
}

// checkOptions checks that o asks for something buildable: at least one
// spec, an output, valid specs and a devbox binary for each platform. It
// returns each platform's LLB constraint.
func checkOptions(o BuildOptions) (map[string]llb.ConstraintsOpt, error) {
	if len(o.Specs) == 0 {
		return nil, errors.New("nothing to build: no platform")
	}
	if len(o.Push) == 0 && o.OCIDir == "" && o.OCITar == "" && o.LoadFunc == nil {
		return nil, errors.New("no output: give --push, --output or --load")
	}
	plats := map[string]llb.ConstraintsOpt{}
	for _, s := range o.Specs {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		p, err := platforms.Parse(s.Platform)
		if err != nil {
			return nil, err
		}
		plats[s.Platform] = llb.Platform(platforms.Normalize(p))
		if o.Binaries[s.Platform] == "" {
			return nil, fmt.Errorf("no devbox binary for %s: this devbox runs on another platform; build one (GOOS=linux GOARCH=%s CGO_ENABLED=0 go build ./cmd/devbox) and pass it with --devbox-binary %s=PATH",
				s.Platform, p.Architecture, s.Platform)
		}
	}
	if o.LoadFunc != nil && len(o.Specs) > 1 {
		return nil, errors.New("--load takes one platform: a Docker engine stores one image per tag")
	}
	return plats, nil
}

// binarySources returns the LLB local sources holding each platform's
// devbox binary, and a cleanup that removes their temporary directories.
func binarySources(binaries map[string]string) (map[string]fsutil.FS, func(), error) {
	var dirs []func()
	cleanup := func() {
		for _, c := range dirs {
			c()
		}
	}
	locals := map[string]fsutil.FS{}
	for plat, bin := range binaries {
		dir, rm, err := binaryContext(bin)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		dirs = append(dirs, rm)
		fs, err := fsutil.NewFS(dir)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		locals[LocalBinaryName(plat)] = fs
	}
	return locals, cleanup, nil
}

// exportAttrs are the attributes of the heavy image's export: OCI media
// types and layer times rewritten to the lock's SOURCE_DATE_EPOCH
// (reproducible layers). Annotations are Assemble's.
func exportAttrs(o BuildOptions) map[string]string {
	return map[string]string{
		"oci-mediatypes":    "true",
		"rewrite-timestamp": strconv.FormatBool(!o.KeepTimestamps),
		"source-date-epoch": strconv.FormatInt(o.Specs[0].Lock.SourceDateEpoch, 10),
	}
}

// solveOptions assembles the solve: exports, the binaries' local sources,
// caches, and registry credentials from the Docker config.
func solveOptions(o BuildOptions, exports []client.ExportEntry, locals map[string]fsutil.FS) client.SolveOpt {
	dockerCfg := config.LoadDefaultConfigFile(io.Discard)
	return client.SolveOpt{
		// The binaries' local sources have fixed names and shared-key
		// hints, so buildkitd reuses their synced snapshot between
		// sessions. Keyed by the binaries' content, two clients building
		// with different devbox binaries at once (the test suite's
		// packages do) never share one: a shared snapshot once put one
		// client's binary into the other's image.
		SharedKey:    binariesKey(o.Binaries),
		Exports:      exports,
		LocalMounts:  locals,
		CacheImports: o.CacheFrom,
		CacheExports: o.CacheTo,
		// Not nil: with cache imports, buildkit v0.34.2's client copies
		// "cache-imports" into a clone of this map, and a clone of nil is
		// nil (panic: assignment to entry in nil map).
		FrontendAttrs: map[string]string{},
		Session: []session.Attachable{authprovider.NewDockerAuthProvider(authprovider.DockerAuthProviderConfig{
			AuthConfigProvider: authprovider.LoadAuthConfig(dockerCfg),
		})},
	}
}

// gatewayBuild returns the build function BuildKit's gateway runs: one
// solve per spec, each result with its image config, gathered into one
// image or, for several platforms, an index.
func gatewayBuild(o BuildOptions, plats map[string]llb.ConstraintsOpt) gateway.BuildFunc {
	cacheImports := make([]gateway.CacheOptionsEntry, 0, len(o.CacheFrom))
	for _, c := range o.CacheFrom {
		cacheImports = append(cacheImports, gateway.CacheOptionsEntry{Type: c.Type, Attrs: c.Attrs})
	}
	multi := len(o.Specs) > 1
	return func(ctx context.Context, gc gateway.Client) (*gateway.Result, error) {
		res := gateway.NewResult()
		var exp exptypes.Platforms
		for _, spec := range o.Specs {
			ref, cfg, err := solvePlatform(ctx, gc, spec, plats[spec.Platform], cacheImports)
			if err != nil {
				return nil, err
			}
			if !multi {
				res.SetRef(ref)
				res.AddMeta(exptypes.ExporterImageConfigKey, cfg)
				continue
			}
			p := platforms.Normalize(platforms.MustParse(spec.Platform))
			id := platforms.FormatAll(p)
			res.AddRef(id, ref)
			res.AddMeta(exptypes.ExporterImageConfigKey+"/"+id, cfg)
			exp.Platforms = append(exp.Platforms, exptypes.Platform{ID: id, Platform: p})
		}
		if multi {
			dt, err := json.Marshal(exp)
			if err != nil {
				return nil, err
			}
			res.AddMeta(exptypes.ExporterPlatformsKey, dt)
		}
		return res, nil
	}
}

// solvePlatform solves spec's graph inside the gateway and returns its
// result and image config.
func solvePlatform(ctx context.Context, gc gateway.Client, spec Spec, plat llb.ConstraintsOpt,
	cacheImports []gateway.CacheOptionsEntry) (gateway.Reference, []byte, error) {
	st, err := Graph(spec)
	if err != nil {
		return nil, nil, err
	}
	def, err := st.Marshal(ctx, plat)
	if err != nil {
		return nil, nil, err
	}
	// A gateway build imports caches only for the solves that ask:
	// SolveOpt.CacheImports reaches the daemon as a frontend attribute that
	// frontends must pass on themselves (as dockerui does), so without this
	// --cache-from is ignored.
	r, err := gc.Solve(ctx, gateway.SolveRequest{Definition: def.ToPB(), Evaluate: true, CacheImports: cacheImports})
	if err != nil {
		return nil, nil, err
	}
	ref, err := r.SingleRef()
	if err != nil {
		return nil, nil, err
	}
	// The base's config gives the history its first entries; the daemon
	// already resolved it for the graph, so this is a cache hit, not another
	// registry round trip.
	p := platforms.Normalize(platforms.MustParse(spec.Platform))
	_, _, baseCfg, err := gc.ResolveImageConfig(ctx, spec.Lock.Base.Pinned(), sourceresolver.Opt{
		ImageOpt: &sourceresolver.ResolveImageOpt{Platform: &p},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("resolving the base image config: %w", err)
	}
	cfg, err := ConfigJSON(spec, baseCfg)
	if err != nil {
		return nil, nil, err
	}
	return ref, cfg, nil
}

// newDisplay returns the progress display for mode (auto when empty),
// writing to out (nowhere when nil).
func newDisplay(mode string, out io.Writer) (progressui.Display, error) {
	if out == nil {
		out = io.Discard
	}
	m := progressui.DisplayMode(mode)
	if m == "" {
		m = progressui.AutoMode
	}
	d, err := progressui.NewDisplay(out, m)
	if err != nil {
		return progressui.Display{}, fmt.Errorf("--progress %s: %w", mode, err)
	}
	return d, nil
}

// solve runs the build and tees its status stream into rec and the
// display, under one errgroup. A failed devbox step comes back as a
// *StepError.
func solve(ctx context.Context, c *client.Client, opt client.SolveOpt, build gateway.BuildFunc,
	display progressui.Display, rec *recorder) (*client.SolveResponse, error) {
	statusCh := make(chan *client.SolveStatus)
	displayCh := make(chan *client.SolveStatus)
	eg, ectx := errgroup.WithContext(ctx)
	var resp *client.SolveResponse
	eg.Go(func() error {
		var err error
		resp, err = c.Build(ectx, opt, "devbox", build, statusCh)
		return err
	})
	eg.Go(func() error {
		// Tee the status stream: the display, and the vertex record tests
		// and `devbox build` use to say what was cached.
		defer close(displayCh)
		for s := range statusCh {
			rec.record(s)
			displayCh <- s
		}
		return nil
	})
	eg.Go(func() error {
		_, err := display.UpdateFrom(context.WithoutCancel(ectx), displayCh)
		return err
	})
	if err := eg.Wait(); err != nil {
		return nil, rec.stepError(err)
	}
	return resp, nil
}

// recorder keeps what the status stream said: each vertex once, in the
// order it completed, the tail of each vertex's log, and the first vertex
// that failed.
type recorder struct {
	mu        sync.Mutex
	stepNames map[string]bool
	vertices  []Vertex
	seen      map[string]int
	logs      map[string][]byte
	// failed is the digest of the first vertex that failed, failedName its
	// name.
	failed, failedName string
}

// newRecorder returns a recorder that knows the names of the specs' run
// and copy steps, the ones Result.Steps reports.
func newRecorder(specs []Spec) (*recorder, error) {
	r := &recorder{stepNames: map[string]bool{}, seen: map[string]int{}, logs: map[string][]byte{}}
	for _, spec := range specs {
		steps, err := Steps(spec)
		if err != nil {
			return nil, err
		}
		for _, st := range steps {
			if st.Kind != FetchStep && !st.Tail {
				r.stepNames[VertexPrefix+st.Name] = true
			}
		}
	}
	return r, nil
}

// logTail is how much of each vertex's output is kept for a StepError.
const logTail = 8 << 10

func (r *recorder) record(s *client.SolveStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range s.Logs {
		d := l.Vertex.String()
		r.logs[d] = append(r.logs[d], l.Data...)
		if n := len(r.logs[d]); n > logTail {
			r.logs[d] = r.logs[d][n-logTail:]
		}
	}
	for _, v := range s.Vertexes {
		if v.Error != "" && r.failed == "" {
			r.failed, r.failedName = v.Digest.String(), v.Name
		}
	}
	for _, v := range s.Vertexes {
		if v.Completed == nil {
			continue
		}
		d := v.Digest.String()
		vx := Vertex{Name: v.Name, Cached: v.Cached}
		if v.Started != nil {
			vx.Duration = v.Completed.Sub(*v.Started)
		}
		if i, ok := r.seen[d]; ok {
			r.vertices[i] = vx
		} else {
			r.seen[d] = len(r.vertices)
			r.vertices = append(r.vertices, vx)
		}
	}
}

// stepError wraps err in a StepError when the first vertex that failed is
// one of devbox's steps.
func (r *recorder) stepError(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != "" && strings.HasPrefix(r.failedName, VertexPrefix) {
		return &StepError{Step: strings.TrimPrefix(r.failedName, VertexPrefix), Output: lastLines(string(r.logs[r.failed]), 10), Err: err}
	}
	return err
}

// result returns a Result holding the recorded vertices.
func (r *recorder) result() *Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Result{Vertices: slices.Clone(r.vertices), stepNames: r.stepNames}
}

// StepError is a failed devbox build step: its name and the end of its
// output, which says why (a checksum mismatch, an apt error). Err is
// BuildKit's error, which quotes the whole script.
type StepError struct {
	Step   string
	Output string
	Err    error
}

func (e *StepError) Error() string {
	if e.Output == "" {
		return fmt.Sprintf("step %s failed: %v", e.Step, e.Err)
	}
	return fmt.Sprintf("step %s failed:\n%s", e.Step, e.Output)
}

func (e *StepError) Unwrap() error { return e.Err }

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// repository strips a tag from ref ("host:5000/x:tag" → "host:5000/x").
func repository(ref string) string {
	if at := strings.LastIndex(ref, "@"); at >= 0 {
		ref = ref[:at]
	}
	if c := strings.LastIndex(ref, ":"); c > strings.LastIndex(ref, "/") {
		ref = ref[:c]
	}
	return ref
}

// checkPlatforms fails clearly when no worker of the daemon can build one
// of the specs' platforms (a multi-platform build without emulation).
func checkPlatforms(ctx context.Context, c *client.Client, specs []Spec) error {
	ws, err := c.ListWorkers(ctx)
	if err != nil {
		return fmt.Errorf("asking BuildKit for its workers: %w", err)
	}
	var have []string
	for _, w := range ws {
		for _, p := range w.Platforms {
			have = append(have, platforms.Format(platforms.Normalize(p)))
		}
	}
	for _, s := range specs {
		want := platforms.Format(platforms.Normalize(platforms.MustParse(s.Platform)))
		ok := false
		for _, h := range have {
			if platforms.OnlyStrict(platforms.MustParse(h)).Match(platforms.MustParse(want)) {
				ok = true
			}
		}
		if !ok {
			slices.Sort(have)
			return fmt.Errorf("the BuildKit daemon cannot build %s (its workers run %s); install QEMU binfmt handlers on the daemon's host (e.g. tonistiigi/binfmt) or use a builder of that platform",
				s.Platform, strings.Join(slices.Compact(have), ", "))
		}
	}
	return nil
}

// binaryContext returns a directory holding bin as ContextBinary, so the
// local source always has the same file name whatever bin is called.
// binariesKey is a digest of the devbox binaries' platforms and contents
// ("" when one cannot be read: binarySources reports that).
func binariesKey(binaries map[string]string) string {
	h := sha256.New()
	for _, plat := range slices.Sorted(maps.Keys(binaries)) {
		f, err := os.Open(binaries[plat])
		if err != nil {
			return ""
		}
		fmt.Fprintf(h, "%s\x00", plat)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return ""
		}
	}
	return "devbox-binaries-" + hex.EncodeToString(h.Sum(nil))[:32]
}

func binaryContext(bin string) (string, func(), error) {
	fi, err := os.Stat(bin)
	if err != nil {
		return "", nil, fmt.Errorf("devbox binary: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("devbox binary %s is not a regular file", bin)
	}
	dir, err := os.MkdirTemp("", "devbox-bin-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	dst := filepath.Join(dir, ContextBinary)
	if err := os.Link(bin, dst); err != nil {
		if err := copyFile(bin, dst); err != nil {
			cleanup()
			return "", nil, fmt.Errorf("devbox binary: %w", err)
		}
	}
	return dir, cleanup, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
