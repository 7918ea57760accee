// Package gateway is the credential gateway: an HTTP server on loopback
// that forwards the agent's requests to the hosts of the policy's
// credentials section, with the client's own credentials stripped and the
// user's injected. The agent uses the credentials without ever holding
// them, and on a protected host no other identity can be used.
//
// Routes, by path:
//
//	/git/HOST/OWNER/NAME[.git]/…  git smart-HTTP to https://HOST, listed repos only
//	/http/HOST/…                  https://HOST/… with the route's header injected
//	anything else                 the Messages API (credentials.anthropic)
package gateway

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/devbox-dev/devbox/internal/jsonl"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/secrets"
)

// SecretSource gives the current value of a secret. The gateway asks on
// every request, so `devbox secret set` takes effect without a restart.
type SecretSource interface {
	Secret(name string) ([]byte, error)
}

// OAuthTokenPrefix starts the OAuth tokens `claude setup-token` prints.
// Anything else is taken for an API key (sk-ant-api…).
const OAuthTokenPrefix = "sk-ant-oat"

// oauthBeta is the anthropic-beta flag the Messages API wants with an
// OAuth bearer token. Claude Code sends it itself only when it knows it
// holds an OAuth token, and behind the gateway it holds a placeholder.
const oauthBeta = "oauth-2025-04-20"

// GitUser is the user name sent with a git token in basic auth (GitHub
// ignores the name for tokens; this is the one its docs use for app tokens).
const GitUser = "x-access-token"

// Path prefixes of the routes.
const (
	GitPrefix  = "/git/"
	HTTPPrefix = "/http/"
	// HealthPath answers 200 from the gateway itself, for the start-up
	// check and doctor.
	HealthPath = "/_devbox/health"
	// RoutesPath answers each route's state as JSON ([]RouteStatus), for
	// doctor: whether its secret is set (never the value nor a
	// fingerprint) and whether the upstream completes a verified TLS
	// handshake. Anyone in the container may ask. With the query
	// SkipUpstream the handshakes are left out.
	RoutesPath = "/_devbox/routes"
	// SkipUpstream is the RoutesPath query that leaves the upstream
	// handshakes out: the login banner's `devbox doctor --quiet` runs at
	// every login shell and reports only what is not enforced, which the
	// upstream's reachability is not; without it every shell would open a
	// TLS connection to each protected host, and wait for a slow one.
	SkipUpstream = "upstream=skip"
)

// RouteStatus is one route as the gateway sees it.
type RouteStatus struct {
	Route  string `json:"route"` // "anthropic", "git", "http"
	Host   string `json:"host"`
	Secret string `json:"secret"` // its name
	// SecretSet is true when the secret has a valid value.
	SecretSet bool `json:"secretSet"`
	// Upstream is "" when a TLS handshake with the host (certificate
	// verified, nothing sent) succeeded, else why not.
	Upstream string `json:"upstream,omitempty"`
	// UpstreamSkipped is true when no handshake was tried (SkipUpstream):
	// Upstream then says nothing.
	UpstreamSkipped bool `json:"upstreamSkipped,omitempty"`
}

// Gateway is the credential gateway's handler.
type Gateway struct {
	creds   policy.Credentials
	secrets SecretSource
	log     *logger
	proxy   *httputil.ReverseProxy
}

var _ http.Handler = (*Gateway)(nil)

// Option configures New.
type Option func(*Gateway)

// WithTransport sets the upstream transport. The default is an
// http.Transport that verifies certificates against the system roots,
// ignores proxy environment variables and dials by name.
func WithTransport(rt http.RoundTripper) Option {
	return func(g *Gateway) { g.proxy.Transport = rt }
}

// WithLog sets where the log goes: one JSON line (Entry) per request,
// naming the route, the secret and its fingerprint, never a value. The
// default discards it.
func WithLog(w io.Writer) Option {
	return func(g *Gateway) { g.log = &logger{jsonl.Log[Entry]{W: w}} }
}

// ErrorLog is the logger the gateway's http.Server writes its own errors
// to: JSON lines in the gateway's log (Serve uses it).
func (g *Gateway) ErrorLog() *log.Logger { return g.log.errorLog() }

// Listening logs that the gateway serves on addr, with its routes' hosts.
func (g *Gateway) Listening(addr string) {
	g.log.log(Entry{Event: "listening", Addr: addr, Hosts: g.creds.Hosts()})
}

// DefaultTransport is the upstream transport New uses by default.
func DefaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// The gateway's upstream is the protected host itself: never a proxy
	// named by an environment variable.
	t.Proxy = nil
	t.ResponseHeaderTimeout = 10 * time.Minute
	return t
}

// New returns a gateway for creds, reading secrets from src.
func New(creds policy.Credentials, src SecretSource, opts ...Option) *Gateway {
	g := &Gateway{creds: creds, secrets: src}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: rewrite,
		// Server-sent events go to the client as they arrive.
		FlushInterval: -1,
		Transport:     DefaultTransport(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t := r.Context().Value(targetKey{}).(*target)
			g.log.log(Entry{Event: "upstream-error", Route: t.route, Method: r.Method, Host: t.host, Path: rawPath(r), Status: http.StatusBadGateway, Reason: err.Error(), Secret: t.secret, Fingerprint: t.fingerprint})
			deny(w, t.route, http.StatusBadGateway, fmt.Sprintf("upstream %s: %v", t.host, err))
		},
		ModifyResponse: func(resp *http.Response) error {
			t := resp.Request.Context().Value(targetKey{}).(*target)
			g.log.log(Entry{Event: "forwarded", Route: t.route, Method: resp.Request.Method, Host: t.host, Path: t.logPath, Status: resp.StatusCode, Secret: t.secret, Fingerprint: t.fingerprint})
			return nil
		},
	}
	for _, o := range opts {
		o(g)
	}
	g.proxy.ErrorLog = g.log.errorLog()
	return g
}

// target is what a route decided for one request; Rewrite applies it.
type target struct {
	route       string // "anthropic", "git", "http" for logs
	host        string
	path        string // upstream path
	query       string // upstream raw query, canonical (see canonicalQuery)
	logPath     string // the client's path, escaped (rawPath)
	secret      string // secret name, for logs
	fingerprint string
	// keep says which of the client's headers go upstream (by name as
	// received); the rest, credentials first, are dropped.
	keep func(name string) bool
	// set adds the credential to the outgoing headers.
	set func(h http.Header)
}

type targetKey struct{}

func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*target)
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = t.host
	pr.Out.URL.Path = t.path
	pr.Out.URL.RawPath = ""
	pr.Out.URL.RawQuery = t.query
	pr.Out.URL.ForceQuery = false
	pr.Out.Host = t.host
	for name := range pr.Out.Header {
		if !t.keep(name) {
			delete(pr.Out.Header, name)
		}
	}
	// Trailers of a chunked body would go up after the checks: none do.
	pr.Out.Trailer = nil
	t.set(pr.Out.Header)
}

// Routes reports every route's secret and, when handshake is set, whether
// its upstream completes a verified TLS handshake.
func (g *Gateway) Routes(ctx context.Context, handshake bool) []RouteStatus {
	var out []RouteStatus
	if a := g.creds.Anthropic; a != nil {
		out = append(out, RouteStatus{Route: "anthropic", Host: a.Host, Secret: a.Secret})
	}
	for _, c := range g.creds.Git {
		out = append(out, RouteStatus{Route: "git", Host: c.Host, Secret: c.Secret})
	}
	for _, c := range g.creds.HTTP {
		out = append(out, RouteStatus{Route: "http", Host: c.Host, Secret: c.Secret})
	}
	for i := range out {
		_, err := g.secrets.Secret(out[i].Secret)
		out[i].SecretSet = err == nil
		if !handshake {
			out[i].UpstreamSkipped = true
			continue
		}
		out[i].Upstream = g.handshake(ctx, out[i].Host)
	}
	return out
}

// handshake opens a TLS connection to host:443 the way requests do (same
// transport: dialer, roots) and closes it: "" when it worked.
func (g *Gateway) handshake(ctx context.Context, host string) string {
	tr, ok := g.proxy.Transport.(*http.Transport)
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	raw, err := dial(ctx, "tcp", net.JoinHostPort(host, "443"))
	if err != nil {
		return err.Error()
	}
	defer raw.Close()
	cfg := &tls.Config{ServerName: host}
	if tr.TLSClientConfig != nil {
		cfg = tr.TLSClientConfig.Clone()
		cfg.ServerName = host
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return err.Error()
	}
	conn.Close()
	return ""
}

// deny writes a refusal that says what to change: in the Messages API's
// error format on the anthropic route, so Claude Code shows the message,
// else as plain text (git shows it as "remote:" lines).
func deny(w http.ResponseWriter, route string, code int, msg string) {
	w.Header().Set("X-Devbox-Gateway", "refused")
	if route == "anthropic" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(anthropicError(code, "devbox gateway: "+msg))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintf(w, "devbox gateway: %s\n", msg)
}

// APIError is the Messages API's error body.
type APIError struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicError is the Messages API's error for an HTTP status, with the
// error types its documentation gives for each.
func anthropicError(code int, msg string) APIError {
	e := APIError{Type: "error"}
	e.Error.Message = msg
	switch code {
	case http.StatusUnauthorized:
		e.Error.Type = "authentication_error"
	case http.StatusForbidden:
		e.Error.Type = "permission_error"
	case http.StatusNotFound:
		e.Error.Type = "not_found_error"
	case http.StatusBadGateway, http.StatusInternalServerError:
		e.Error.Type = "api_error"
	default:
		e.Error.Type = "invalid_request_error"
	}
	return e
}

// refusal is a route's "no": the status, the message the client sees, and
// for the anthropic route the Messages API error type when the status's
// usual one is not the one Claude Code should show.
type refusal struct {
	code    int
	msg     string
	errType string
}

func refuse(code int, format string, args ...any) *refusal {
	return &refusal{code: code, msg: fmt.Sprintf(format, args...)}
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route := routeOf(r.URL.Path)
	if why := protocolSwitch(r); why != "" {
		g.refused(w, r, route, refuse(http.StatusBadRequest, "%s", why))
		return
	}
	if r.URL.Path == HealthPath || r.URL.Path == RoutesPath {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			g.refused(w, r, "", refuse(http.StatusMethodNotAllowed, "%s answers GET only", r.URL.Path))
			return
		}
		if r.URL.Path == HealthPath {
			w.WriteHeader(http.StatusOK)
			fmt.Fprintln(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(g.Routes(r.Context(), r.URL.RawQuery != SkipUpstream))
		return
	}
	// A request line in absolute form (a client using the gateway as a
	// proxy), in authority form (CONNECT), with an escaped path or one
	// that decodes to control characters is not something any route makes.
	if r.URL.IsAbs() || r.URL.Host != "" || r.URL.RawPath != "" || !strings.HasPrefix(r.URL.Path, "/") || strings.Contains(r.URL.Path, "//") || hasDotSegment(r.URL.Path) ||
		strings.IndexFunc(r.URL.Path, unicode.IsControl) >= 0 {
		g.refused(w, r, route, refuse(http.StatusBadRequest, "malformed request path"))
		return
	}
	var (
		t   *target
		ref *refusal
	)
	switch route {
	case "git":
		t, ref = g.git(r)
	case "http":
		t, ref = g.http(r)
	default:
		t, ref = g.anthropic(r)
	}
	if ref != nil {
		g.refused(w, r, route, ref)
		return
	}
	t.logPath = rawPath(r)
	// The upstream's response streams back (FlushInterval -1) while the
	// transport may still be copying the request body up. Without full
	// duplex, net/http closes an HTTP/1 request body as soon as the first
	// response bytes are flushed; the transport's body write then fails and
	// it closes the upstream connection in the middle of the stream
	// ("use of closed network connection"), cutting SSE replies short.
	_ = http.NewResponseController(w).EnableFullDuplex()
	g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// routeOf names the route a path belongs to.
func routeOf(path string) string {
	switch {
	case strings.HasPrefix(path, GitPrefix):
		return "git"
	case strings.HasPrefix(path, HTTPPrefix):
		return "http"
	}
	return "anthropic"
}

// refused logs a refusal and answers it; nothing went upstream.
func (g *Gateway) refused(w http.ResponseWriter, r *http.Request, route string, ref *refusal) {
	g.log.log(Entry{Event: "refused", Route: route, Method: r.Method, Path: rawPath(r), Status: ref.code, Reason: ref.msg})
	if route == "anthropic" && ref.errType != "" {
		e := anthropicError(ref.code, "devbox gateway: "+ref.msg)
		e.Error.Type = ref.errType
		w.Header().Set("X-Devbox-Gateway", "refused")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(ref.code)
		json.NewEncoder(w).Encode(e)
		return
	}
	deny(w, route, ref.code, ref.msg)
}

// method refuses r's method unless allowed lists it.
func method(r *http.Request, allowed []string, route string) *refusal {
	if slices.Contains(allowed, r.Method) {
		return nil
	}
	return refuse(http.StatusMethodNotAllowed, "method %s is not forwarded on the %s route (allowed: %s)", quoteName(r.Method), route, strings.Join(allowed, ", "))
}

func hasDotSegment(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// LoginCommand is what the user runs on the host, in the repository, to
// store the Claude credential (devbox login); SecretSetCommand stores any
// other secret.
const (
	LoginCommand     = "devbox login"
	SecretSetCommand = "devbox secret set"
)

// secret reads a secret for a route; a missing one is a 503 that says how
// to set it.
func (g *Gateway) secret(name string) ([]byte, *refusal) {
	v, err := g.secrets.Secret(name)
	if errors.Is(err, secrets.ErrNotSet) {
		return nil, refuse(http.StatusServiceUnavailable, "secret %q is not set; on the host, in the repository, run: %s %s", name, SecretSetCommand, name)
	}
	if err != nil {
		return nil, refuse(http.StatusServiceUnavailable, "%s", err.Error())
	}
	return v, nil
}

func (g *Gateway) anthropic(r *http.Request) (*target, *refusal) {
	a := g.creds.Anthropic
	if a == nil {
		return nil, refuse(http.StatusNotFound, "no route for %s (credentials.anthropic is not set; git is under %s, http routes under %s)", quoteName(r.URL.EscapedPath()), GitPrefix, HTTPPrefix)
	}
	if ref := method(r, anthropicMethods, "anthropic"); ref != nil {
		return nil, ref
	}
	query, why := canonicalQuery(r.URL.RawQuery)
	if why != "" {
		return nil, refuse(http.StatusBadRequest, "%s", why)
	}
	v, err := g.secrets.Secret(a.Secret)
	if errors.Is(err, secrets.ErrNotSet) {
		// Claude Code shows a 403 authentication_error's message once,
		// without retrying (measured with 2.1.332: a 401 is retried, with
		// no message, until the run times out).
		return nil, &refusal{code: http.StatusForbidden, errType: "authentication_error",
			msg: fmt.Sprintf("no Claude credential is stored for this container yet (secret %q). On the host, in the repository, run: %s", a.Secret, LoginCommand)}
	}
	if err != nil {
		return nil, &refusal{code: http.StatusServiceUnavailable, errType: "api_error", msg: err.Error()}
	}
	key := string(v)
	return &target{
		route: "anthropic", host: a.Host, path: r.URL.Path, query: query, secret: a.Secret, fingerprint: secrets.Fingerprint(v),
		keep: keepAllowed(anthropicHeaders, anthropicHeaderPrefixes),
		set: func(h http.Header) {
			if strings.HasPrefix(key, OAuthTokenPrefix) {
				h.Set("Authorization", "Bearer "+key)
				addBeta(h, oauthBeta)
				return
			}
			h.Set("X-Api-Key", key)
		},
	}, nil
}

// addBeta adds flag to the anthropic-beta header unless it is there.
func addBeta(h http.Header, flag string) {
	var all []string
	for _, v := range h.Values("Anthropic-Beta") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if f == flag {
					return
				}
				all = append(all, f)
			}
		}
	}
	h.Set("Anthropic-Beta", strings.Join(append(all, flag), ","))
}

// Git smart-HTTP endpoints, after the repository path, and the only
// queries info/refs is asked with: byte for byte what git sends. git
// http-backend reads the last of repeated parameters, decodes escapes in
// names and values and takes "+" for a space; a canonical form leaves
// nothing for it to read differently (TestGitQueryDifferential).
const (
	gitInfoRefs    = "/info/refs"
	gitUploadPack  = "/git-upload-pack"
	gitReceivePack = "/git-receive-pack"

	gitQueryUploadPack  = "service=git-upload-pack"
	gitQueryReceivePack = "service=git-receive-pack"
)

// GitService is the service a request for info/refs with raw query asks
// git http-backend for, as the gateway reads it: "git-upload-pack",
// "git-receive-pack", or "" when the query is not one of the two forms git
// sends (the gateway then refuses it).
func GitService(rawQuery string) string {
	switch rawQuery {
	case gitQueryUploadPack:
		return "git-upload-pack"
	case gitQueryReceivePack:
		return "git-receive-pack"
	}
	return ""
}

func (g *Gateway) git(r *http.Request) (*target, *refusal) {
	host, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, GitPrefix), "/")
	idx := -1
	for i, c := range g.creds.Git {
		if c.Host == host {
			idx = i
		}
	}
	if idx < 0 {
		return nil, refuse(http.StatusForbidden, "%s is not a git host of the policy (credentials.git)", quoteName(host))
	}
	c := g.creds.Git[idx]
	rest = "/" + rest
	var (
		repo, endpoint string
		push           bool
	)
	for _, e := range []string{gitInfoRefs, gitUploadPack, gitReceivePack} {
		if strings.HasSuffix(rest, e) {
			repo, endpoint = strings.TrimSuffix(rest, e), e
		}
	}
	want := http.MethodPost
	if endpoint == gitInfoRefs {
		want = http.MethodGet
	}
	switch {
	case endpoint == "":
		return nil, refuse(http.StatusForbidden, "only git's smart HTTP protocol is forwarded (info/refs, git-upload-pack, git-receive-pack)")
	case r.Method != want:
		return nil, refuse(http.StatusMethodNotAllowed, "method %s is not forwarded for %s (git's smart HTTP sends %s)", quoteName(r.Method), endpoint, want)
	case endpoint == gitInfoRefs:
		switch GitService(r.URL.RawQuery) {
		case "git-upload-pack":
		case "git-receive-pack":
			push = true
		default:
			return nil, refuse(http.StatusBadRequest, "info/refs is forwarded with exactly ?%s or ?%s (git's own requests), no other query", gitQueryUploadPack, gitQueryReceivePack)
		}
	case r.URL.RawQuery != "" || r.URL.ForceQuery:
		return nil, refuse(http.StatusBadRequest, "%s is forwarded without a query", endpoint)
	case endpoint == gitReceivePack:
		push = true
	}
	name := strings.TrimSuffix(strings.TrimPrefix(repo, "/"), ".git")
	listed := slices.Contains(c.Repos, name)
	key := fmt.Sprintf("credentials.git[%d]", idx)
	if !listed {
		return nil, refuse(http.StatusForbidden, "%s/%s is not in %s.repos of the policy; the token is used for the listed repositories only", host, quoteName(name), key)
	}
	if push && !c.Push {
		return nil, refuse(http.StatusForbidden, "push to %s/%s is refused: %s.push is false in the policy", host, name, key)
	}
	v, ref := g.secret(c.Secret)
	if ref != nil {
		return nil, ref
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(GitUser+":"+string(v)))
	return &target{
		route: "git", host: host, path: rest, query: r.URL.RawQuery, secret: c.Secret, fingerprint: secrets.Fingerprint(v),
		keep: keepAllowed(gitHeaders, nil),
		set:  func(h http.Header) { h.Set("Authorization", auth) },
	}, nil
}

func (g *Gateway) http(r *http.Request) (*target, *refusal) {
	host, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, HTTPPrefix), "/")
	i := slices.IndexFunc(g.creds.HTTP, func(c policy.HTTPCredential) bool { return c.Host == host })
	if i < 0 {
		return nil, refuse(http.StatusForbidden, "%s is not an http host of the policy (credentials.http)", quoteName(host))
	}
	c := g.creds.HTTP[i]
	if ref := method(r, httpMethods, "http"); ref != nil {
		return nil, ref
	}
	query, why := canonicalQuery(r.URL.RawQuery)
	if why != "" {
		return nil, refuse(http.StatusBadRequest, "%s", why)
	}
	v, ref := g.secret(c.Secret)
	if ref != nil {
		return nil, ref
	}
	value := strings.Replace(c.Value, policy.SecretPlaceholder, string(v), 1)
	header := c.Header
	return &target{
		route: "http", host: host, path: "/" + rest, query: query, secret: c.Secret, fingerprint: secrets.Fingerprint(v),
		keep: keepHTTP(header),
		set:  func(h http.Header) { h.Set(header, value) },
	}, nil
}
