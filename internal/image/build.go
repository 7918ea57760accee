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

	// KeepTimestamps skips rewriting every layer's file times to the
	// lock's SOURCE_DATE_EPOCH. The rewrite makes a build from an empty
	// cache give the same layers; it costs a pass over every layer (about
	// half a minute for the default image) on each export.
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
	// Elapsed is the wall time of the solve.
	Elapsed time.Duration

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

// Build solves the image graph of every spec against c and exports it. It
// checks the specs first, the daemon's platforms next, and pushes only
// after everything built: a failing step (a wrong Claude Code checksum, a
// missing base digest) pushes nothing.
func Build(ctx context.Context, c *client.Client, o BuildOptions) (*Result, error) {
	plats, err := checkOptions(o)
	if err != nil {
		return nil, err
	}
	if err := checkPlatforms(ctx, c, o.Specs); err != nil {
		return nil, err
	}
	locals, cleanup, err := binarySources(o.Binaries)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	exports, load := exportEntries(o)
	display, err := newDisplay(o.Progress, o.ProgressOut)
	if err != nil {
		return nil, err
	}
	rec, err := newRecorder(o.Specs)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := solve(ctx, c, solveOptions(o, exports, locals), gatewayBuild(o, plats), display, rec, load)
	if err != nil {
		return nil, err
	}
	res := rec.result()
	res.Elapsed = time.Since(start)
	if load != nil {
		res.Loaded = load.msg
	}
	res.Digest = resp.ExporterResponse[exptypes.ExporterImageDigestKey]
	if res.Digest == "" {
		return nil, errors.New("BuildKit returned no image digest")
	}
	for _, ref := range o.Push {
		res.Pushed = append(res.Pushed, repository(ref)+"@"+res.Digest)
	}
	return res, nil
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

// exportAttrs are the attributes every exporter shares: OCI media types,
// layer times rewritten to the lock's SOURCE_DATE_EPOCH (reproducible
// layers) and the image annotations, on the index too for a multi-platform
// build.
func exportAttrs(o BuildOptions) map[string]string {
	attrs := map[string]string{
		"oci-mediatypes":    "true",
		"rewrite-timestamp": strconv.FormatBool(!o.KeepTimestamps),
		"source-date-epoch": strconv.FormatInt(o.Specs[0].Lock.SourceDateEpoch, 10),
	}
	multi := len(o.Specs) > 1
	for k, v := range Annotations(o.Specs[0], o.DevboxVersion) {
		attrs["annotation-manifest."+k] = v
		if multi {
			attrs["annotation-index."+k] = v
		}
	}
	return attrs
}

// dockerLoad streams the Docker exporter's tarball into o.LoadFunc.
type dockerLoad struct {
	pipe *io.PipeReader
	fn   func(ctx context.Context, r io.Reader) (string, error)
	// msg is what the engine said, set once the load returned.
	msg string
}

// run feeds the exporter's output to the engine until the export ends.
func (l *dockerLoad) run(ctx context.Context) error {
	msg, err := l.fn(ctx, l.pipe)
	// Unblock the exporter if the engine stopped reading early.
	l.pipe.CloseWithError(err)
	l.msg = msg
	return err
}

// exportEntries returns one BuildKit export per output o asks for: push,
// OCI layout directory or tarball, Docker engine. The Docker load, when
// asked, comes back holding the reader side of its exporter's pipe.
func exportEntries(o BuildOptions) ([]client.ExportEntry, *dockerLoad) {
	attrs := exportAttrs(o)
	var exports []client.ExportEntry
	if len(o.Push) > 0 {
		a := maps.Clone(attrs)
		a["name"] = strings.Join(o.Push, ",")
		a["push"] = "true"
		exports = append(exports, client.ExportEntry{Type: client.ExporterImage, Attrs: a})
	}
	if o.OCIDir != "" {
		a := maps.Clone(attrs)
		a["tar"] = "false"
		exports = append(exports, client.ExportEntry{Type: client.ExporterOCI, Attrs: a, OutputDir: o.OCIDir})
	}
	if o.OCITar != "" {
		path := o.OCITar
		exports = append(exports, client.ExportEntry{Type: client.ExporterOCI, Attrs: maps.Clone(attrs),
			Output: func(map[string]string) (io.WriteCloser, error) { return os.Create(path) }})
	}
	var load *dockerLoad
	if o.LoadFunc != nil {
		a := maps.Clone(attrs)
		a["name"] = o.LoadName
		// Docker 20.10 only reads Docker media types.
		a["oci-mediatypes"] = "false"
		pr, pw := io.Pipe()
		load = &dockerLoad{pipe: pr, fn: o.LoadFunc}
		exports = append(exports, client.ExportEntry{Type: client.ExporterDocker, Attrs: a,
			Output: func(map[string]string) (io.WriteCloser, error) { return pw, nil }})
	}
	return exports, load
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
			ref, cfg, err := solvePlatform(ctx, gc, spec, plats[spec.Platform], cacheImports, o.DevboxVersion)
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
	cacheImports []gateway.CacheOptionsEntry, devboxVersion string) (gateway.Reference, []byte, error) {
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
	cfg, err := ConfigJSON(spec, devboxVersion, baseCfg)
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

// solve runs the build, tees its status stream into rec and the display,
// and feeds the Docker load when there is one, all under one errgroup. A
// failed devbox step comes back as a *StepError.
func solve(ctx context.Context, c *client.Client, opt client.SolveOpt, build gateway.BuildFunc,
	display progressui.Display, rec *recorder, load *dockerLoad) (*client.SolveResponse, error) {
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
	if load != nil {
		eg.Go(func() error { return load.run(ectx) })
	}
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
			if st.Kind != FetchStep {
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
