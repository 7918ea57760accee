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
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

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
	logf    func(format string, args ...any)
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

// WithLogf sets the logger. Lines name the route, the secret and its
// fingerprint, never a value. The default discards them.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(g *Gateway) { g.logf = logf }
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
	g := &Gateway{creds: creds, secrets: src, logf: func(string, ...any) {}}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: rewrite,
		// Server-sent events go to the client as they arrive.
		FlushInterval: -1,
		Transport:     DefaultTransport(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			t := r.Context().Value(targetKey{}).(*target)
			g.logf("gateway: %s: upstream %s: %v", t.route, t.host, err)
			deny(w, http.StatusBadGateway, fmt.Sprintf("upstream %s: %v", t.host, err))
		},
		ModifyResponse: func(resp *http.Response) error {
			t := resp.Request.Context().Value(targetKey{}).(*target)
			g.logf("gateway: %s %s %s → %s (secret %s, fingerprint %s)", t.route, resp.Request.Method, t.host+resp.Request.URL.Path, resp.Status, t.secret, t.fingerprint)
			return nil
		},
	}
	for _, o := range opts {
		o(g)
	}
	return g
}

// target is what a route decided for one request; Rewrite applies it.
type target struct {
	route       string // "anthropic", "git", "http" for logs
	host        string
	path        string // upstream path
	secret      string // secret name, for logs
	fingerprint string
	// set adds the credential to the outgoing headers (which have been
	// stripped of the client's).
	set func(h http.Header)
}

type targetKey struct{}

// clientCredentialHeaders are removed from every request: on a protected
// host only the user's identity is used.
var clientCredentialHeaders = []string{"Authorization", "X-Api-Key", "Proxy-Authorization", "Cookie"}

func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*target)
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = t.host
	pr.Out.URL.Path = t.path
	pr.Out.URL.RawPath = ""
	pr.Out.Host = t.host
	for _, h := range clientCredentialHeaders {
		pr.Out.Header.Del(h)
	}
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

// deny writes a plain-text refusal that says what to change.
func deny(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Devbox-Gateway", "refused")
	w.WriteHeader(code)
	fmt.Fprintf(w, "devbox gateway: %s\n", msg)
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == HealthPath {
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, "ok")
		return
	}
	if r.URL.Path == RoutesPath {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(g.Routes(r.Context(), r.URL.RawQuery != SkipUpstream))
		return
	}
	// A request line in absolute form (a client using the gateway as a
	// proxy) or with an escaped path is not something any route makes.
	if r.URL.IsAbs() || r.URL.RawPath != "" || strings.Contains(r.URL.Path, "//") || hasDotSegment(r.URL.Path) {
		deny(w, http.StatusBadRequest, "malformed request path")
		return
	}
	var (
		t    *target
		code int
		msg  string
	)
	switch {
	case strings.HasPrefix(r.URL.Path, GitPrefix):
		t, code, msg = g.git(r)
	case strings.HasPrefix(r.URL.Path, HTTPPrefix):
		t, code, msg = g.http(r)
	default:
		t, code, msg = g.anthropic(r)
	}
	if t == nil {
		g.logf("gateway: refused %s %s: %s", r.Method, r.URL.Path, msg)
		deny(w, code, msg)
		return
	}
	// The upstream's response streams back (FlushInterval -1) while the
	// transport may still be copying the request body up. Without full
	// duplex, net/http closes an HTTP/1 request body as soon as the first
	// response bytes are flushed; the transport's body write then fails and
	// it closes the upstream connection in the middle of the stream
	// ("use of closed network connection"), cutting SSE replies short.
	_ = http.NewResponseController(w).EnableFullDuplex()
	g.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

func hasDotSegment(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s == "." || s == ".." {
			return true
		}
	}
	return false
}

// secret reads a secret for a route; a missing one is a 503 that says how
// to set it.
func (g *Gateway) secret(name string) ([]byte, int, string) {
	v, err := g.secrets.Secret(name)
	if errors.Is(err, secrets.ErrNotSet) {
		return nil, http.StatusServiceUnavailable, fmt.Sprintf("secret %q is not set; from the host run: docker exec -i -u root CONTAINER devbox secret set %s", name, name)
	}
	if err != nil {
		return nil, http.StatusServiceUnavailable, err.Error()
	}
	return v, 0, ""
}

func (g *Gateway) anthropic(r *http.Request) (*target, int, string) {
	a := g.creds.Anthropic
	if a == nil {
		return nil, http.StatusNotFound, "no route for " + r.URL.Path + " (credentials.anthropic is not set; git is under " + GitPrefix + ", http routes under " + HTTPPrefix + ")"
	}
	v, code, msg := g.secret(a.Secret)
	if v == nil {
		return nil, code, msg
	}
	key := string(v)
	return &target{
		route: "anthropic", host: a.Host, path: r.URL.Path, secret: a.Secret, fingerprint: secrets.Fingerprint(v),
		set: func(h http.Header) {
			if strings.HasPrefix(key, OAuthTokenPrefix) {
				h.Set("Authorization", "Bearer "+key)
				addBeta(h, oauthBeta)
				return
			}
			h.Set("X-Api-Key", key)
		},
	}, 0, ""
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

// Git smart-HTTP endpoints, after the repository path.
const (
	gitInfoRefs    = "/info/refs"
	gitUploadPack  = "/git-upload-pack"
	gitReceivePack = "/git-receive-pack"
)

func (g *Gateway) git(r *http.Request) (*target, int, string) {
	host, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, GitPrefix), "/")
	idx := -1
	for i, c := range g.creds.Git {
		if c.Host == host {
			idx = i
		}
	}
	if idx < 0 {
		return nil, http.StatusForbidden, fmt.Sprintf("%s is not a git host of the policy (credentials.git)", host)
	}
	c := g.creds.Git[idx]
	rest = "/" + rest
	var repo string
	push := false
	switch {
	case strings.HasSuffix(rest, gitInfoRefs) && r.Method == http.MethodGet:
		repo = strings.TrimSuffix(rest, gitInfoRefs)
		switch r.URL.Query().Get("service") {
		case "git-upload-pack":
		case "git-receive-pack":
			push = true
		default:
			return nil, http.StatusForbidden, "only git's smart HTTP protocol is forwarded (info/refs?service=git-upload-pack or git-receive-pack)"
		}
	case strings.HasSuffix(rest, gitUploadPack) && r.Method == http.MethodPost:
		repo = strings.TrimSuffix(rest, gitUploadPack)
	case strings.HasSuffix(rest, gitReceivePack) && r.Method == http.MethodPost:
		repo, push = strings.TrimSuffix(rest, gitReceivePack), true
	default:
		return nil, http.StatusForbidden, "only git's smart HTTP protocol is forwarded (info/refs, git-upload-pack, git-receive-pack)"
	}
	name := strings.TrimSuffix(strings.TrimPrefix(repo, "/"), ".git")
	listed := false
	for _, rp := range c.Repos {
		if rp == name {
			listed = true
		}
	}
	key := fmt.Sprintf("credentials.git[%d]", idx)
	if !listed {
		return nil, http.StatusForbidden, fmt.Sprintf("%s/%s is not in %s.repos of the policy; the token is used for the listed repositories only", host, name, key)
	}
	if push && !c.Push {
		return nil, http.StatusForbidden, fmt.Sprintf("push to %s/%s is refused: %s.push is false in the policy", host, name, key)
	}
	v, code, msg := g.secret(c.Secret)
	if v == nil {
		return nil, code, msg
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(GitUser+":"+string(v)))
	return &target{
		route: "git", host: host, path: rest, secret: c.Secret, fingerprint: secrets.Fingerprint(v),
		set: func(h http.Header) { h.Set("Authorization", auth) },
	}, 0, ""
}

func (g *Gateway) http(r *http.Request) (*target, int, string) {
	host, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, HTTPPrefix), "/")
	for _, c := range g.creds.HTTP {
		if c.Host != host {
			continue
		}
		v, code, msg := g.secret(c.Secret)
		if v == nil {
			return nil, code, msg
		}
		value := strings.Replace(c.Value, policy.SecretPlaceholder, string(v), 1)
		header := c.Header
		return &target{
			route: "http", host: host, path: "/" + rest, secret: c.Secret, fingerprint: secrets.Fingerprint(v),
			set: func(h http.Header) {
				h.Del(header)
				h.Set(header, value)
			},
		}, 0, ""
	}
	return nil, http.StatusForbidden, fmt.Sprintf("%s is not an http host of the policy (credentials.http)", host)
}
