package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/secrets"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// memSecrets is a SecretSource over a map.
type memSecrets struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memSecrets) Secret(name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[name]
	if !ok {
		return nil, fmt.Errorf("secret %q: %w", name, secrets.ErrNotSet)
	}
	return []byte(v), nil
}

func (s *memSecrets) set(name, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[name] = v
}

// upstreams runs TLS servers on loopback for host names and returns a
// transport that trusts only the test CA and dials each name's server.
type upstreams struct {
	ca    *testworld.CA
	addrs map[string]string
}

func newUpstreams(t *testing.T) *upstreams {
	ca, err := testworld.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	return &upstreams{ca: ca, addrs: map[string]string{}}
}

func (u *upstreams) serve(t *testing.T, host string, h http.Handler) {
	cert, err := u.ca.Certificate(host)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	u.addrs[host+":443"] = s.Listener.Addr().String()
}

func (u *upstreams) transport() *http.Transport {
	tr := DefaultTransport()
	tr.TLSClientConfig = &tls.Config{RootCAs: u.ca.Pool()}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		a, ok := u.addrs[addr]
		if !ok {
			return nil, fmt.Errorf("test: no upstream %s", addr)
		}
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}
	return tr
}

const (
	apiKey     = "sk-ant-api03-USERKEY-0123456789"
	oauthToken = "sk-ant-oat01-USERTOKEN-0123456789"
	gitToken   = "ghp_USERGITTOKEN0123456789"
	httpToken  = "USERHTTPTOKEN-0123456789"
)

func testCreds() policy.Credentials {
	return policy.Credentials{
		Anthropic: &policy.AnthropicCredential{Secret: "anthropic", Host: "api.anthropic.test"},
		Git: []policy.GitCredential{
			{Host: "git.test", Secret: "github", Repos: []string{"acme/app", "acme/ro"}, Push: false},
			{Host: "push.test", Secret: "github", Repos: []string{"acme/app"}, Push: true},
		},
		HTTP: []policy.HTTPCredential{{Host: "api.example.test", Header: "Authorization", Value: "Bearer ${secret}", Secret: "example"}},
	}
}

type fixture struct {
	api     *testworld.MessagesAPI
	git     *testworld.GitServer
	push    *testworld.GitServer
	http    *testworld.Recording
	secrets *memSecrets
	url     string
	logs    *devboxtest.SyncBuffer
}

func newFixture(t *testing.T, hold <-chan struct{}, withGit ...bool) *fixture {
	t.Helper()
	u := newUpstreams(t)
	f := &fixture{
		api:     &testworld.MessagesAPI{Key: apiKey, Reply: "hello from the fake API", Hold: hold},
		http:    &testworld.Recording{},
		secrets: &memSecrets{m: map[string]string{"anthropic": apiKey, "github": gitToken, "example": httpToken}},
		logs:    &devboxtest.SyncBuffer{},
	}
	u.serve(t, "api.anthropic.test", f.api)
	if _, err := exec.LookPath("git"); err == nil && len(withGit) > 0 {
		var err error
		if f.git, err = testworld.NewGitServer(t.TempDir(), gitToken, "acme/app", "acme/ro", "evil/exfil"); err != nil {
			t.Fatal(err)
		}
		if f.push, err = testworld.NewGitServer(t.TempDir(), gitToken, "acme/app", "evil/exfil"); err != nil {
			t.Fatal(err)
		}
		u.serve(t, "git.test", f.git)
		u.serve(t, "push.test", f.push)
	}
	u.serve(t, "api.example.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.http.Add(r)
		fmt.Fprintf(w, "path=%s auth=%s", r.URL.Path, r.Header.Get("Authorization"))
	}))
	g := New(testCreds(), f.secrets, WithTransport(u.transport()), WithLog(f.logs))
	f.url = serve(t, g)
	return f
}

// serve runs h with Serve (the daemon's own server settings) on a loopback
// port until the test ends, and returns its URL.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

func post(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(`{"model":"m","stream":false,"messages":[]}`))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestAnthropicInjectsTheUsersKeyOnly(t *testing.T) {
	f := newFixture(t, nil)
	resp, body := post(t, f.url+"/v1/messages?beta=true", map[string]string{
		"X-Api-Key": "attacker-key", "Authorization": "Bearer attacker-token", "Anthropic-Version": "2023-06-01",
	})
	if resp.StatusCode != 200 || !strings.Contains(body, "hello from the fake API") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	reqs := f.api.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d upstream requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.APIKey != apiKey || r.Authorization != "" || len(r.Headers.Values("X-Api-Key")) != 1 {
		t.Errorf("upstream saw x-api-key %q authorization %q, want only the user's key", r.Headers.Values("X-Api-Key"), r.Authorization)
	}
	if r.Path != "/v1/messages" || r.Headers.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("upstream path %q version %q", r.Path, r.Headers.Get("Anthropic-Version"))
	}
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Forwarded-Host"} {
		if r.Headers.Get(h) != "" {
			t.Errorf("upstream saw %s: %q", h, r.Headers.Get(h))
		}
	}
	if strings.Contains(f.logs.String(), apiKey) || !strings.Contains(f.logs.String(), secrets.Fingerprint([]byte(apiKey))) {
		t.Errorf("log must carry the fingerprint, never the key:\n%s", f.logs)
	}
}

func TestAnthropicOAuthToken(t *testing.T) {
	f := newFixture(t, nil)
	f.api.Key = oauthToken
	f.secrets.set("anthropic", oauthToken)
	resp, body := post(t, f.url+"/v1/messages", map[string]string{"X-Api-Key": "placeholder", "Anthropic-Beta": "claude-code-20250219"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	r := f.api.Requests()[0]
	if r.Authorization != "Bearer "+oauthToken || r.APIKey != "" {
		t.Errorf("upstream saw authorization %q x-api-key %q", r.Authorization, r.APIKey)
	}
	if r.Beta != "claude-code-20250219,oauth-2025-04-20" {
		t.Errorf("anthropic-beta %q, want the client's flags plus %s", r.Beta, oauthBeta)
	}
}

func TestAnthropicStreamsUnbuffered(t *testing.T) {
	hold := make(chan struct{})
	f := newFixture(t, hold)
	defer close(hold)
	req, _ := http.NewRequest("POST", f.url+"/v1/messages", strings.NewReader(`{"model":"m","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The upstream has sent message_start and now waits on hold: the
	// event must reach the client anyway.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: message_start\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
}

// TestMissingSecret: the anthropic route answers in the Messages API's
// error format, with the status Claude Code shows the message for (see
// TestClaudeCodeShowsMissingSecret); the http route in plain text. Both
// name the command to run on the host.
func TestMissingSecret(t *testing.T) {
	f := newFixture(t, nil)
	delete(f.secrets.m, "anthropic")
	delete(f.secrets.m, "example")
	resp, body := post(t, f.url+"/v1/messages", nil)
	var e APIError
	if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != http.StatusForbidden || e.Type != "error" ||
		e.Error.Type != "authentication_error" || !strings.Contains(e.Error.Message, "run: devbox login") {
		t.Errorf("anthropic: status %d body %q (%v)", resp.StatusCode, body, err)
	}
	resp, body = post(t, f.url+"/http/api.example.test/x", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "devbox secret set example") {
		t.Errorf("http: status %d body %q", resp.StatusCode, body)
	}
	if n := len(f.api.Requests()) + len(f.http.Requests()); n != 0 {
		t.Errorf("%d requests reached the upstreams", n)
	}
}

func TestMalformedPaths(t *testing.T) {
	f := newFixture(t, nil)
	for _, p := range []string{"/git/git.test/acme/app/../../evil/exfil/info/refs", "/git/git.test/acme%2fapp/info/refs", "/http/api.example.test//x"} {
		// Send the path as is: net/http's client would not clean it, but
		// build the request line by hand to be sure.
		c, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s?service=git-upload-pack HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", p)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", p, resp.StatusCode)
		}
	}
}

func TestHTTPRoute(t *testing.T) {
	f := newFixture(t, nil)
	resp, body := post(t, f.url+"/http/api.example.test/v2/items", map[string]string{"Authorization": "Bearer attacker", "Cookie": "a=b"})
	if resp.StatusCode != 200 || body != "path=/v2/items auth=Bearer "+httpToken {
		t.Errorf("status %d body %q", resp.StatusCode, body)
	}
	if r := f.http.Requests()[0]; len(r.Headers.Values("Authorization")) != 1 || r.Headers.Get("Cookie") != "" {
		t.Errorf("upstream headers %v", r.Headers)
	}
	resp, body = post(t, f.url+"/http/other.test/x", nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "credentials.http") {
		t.Errorf("unlisted host: status %d body %q", resp.StatusCode, body)
	}
}

func TestUpstreamCertificateIsVerified(t *testing.T) {
	other, err := testworld.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	u := newUpstreams(t)
	cert, _ := other.Certificate("api.anthropic.test")
	s := httptest.NewUnstartedServer(&testworld.MessagesAPI{Key: apiKey})
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	defer s.Close()
	u.addrs["api.anthropic.test:443"] = s.Listener.Addr().String()
	g := httptest.NewServer(New(testCreds(), &memSecrets{m: map[string]string{"anthropic": apiKey}}, WithTransport(u.transport())))
	defer g.Close()
	resp, body := post(t, g.URL+"/v1/messages", nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "certificate") {
		t.Errorf("status %d body %q, want 502 for an untrusted certificate", resp.StatusCode, body)
	}
}

// gitCmd runs git with the gateway standing in for the hosts, the way the
// image's system gitconfig sets it up.
func gitCmd(t *testing.T, f *fixture, dir string, args ...string) (string, error) {
	t.Helper()
	base := []string{
		"-c", "url." + f.url + "/git/git.test/.insteadOf=https://git.test/",
		"-c", "url." + f.url + "/git/push.test/.insteadOf=https://push.test/",
		"-c", "user.name=agent", "-c", "user.email=agent@x.test", "-c", "credential.helper=",
	}
	cmd := exec.Command("git", append(base, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// requireGit skips t without git, and fails it under DEVBOX_E2E.
func requireGit(t *testing.T) string {
	t.Helper()
	return devboxtest.LookBinary(t, "git")
}

func TestGitRoute(t *testing.T) {
	requireGit(t)
	f := newFixture(t, nil, true)
	dir := t.TempDir()
	if out, err := gitCmd(t, f, dir, "clone", "-q", "https://push.test/acme/app.git", "app"); err != nil {
		t.Fatalf("clone listed repo: %v\n%s", err, out)
	}
	app := filepath.Join(dir, "app")
	os.WriteFile(filepath.Join(app, "new"), []byte("x"), 0o644)
	if out, err := gitCmd(t, f, app, "add", "new"); err != nil {
		t.Fatal(out)
	}
	if out, err := gitCmd(t, f, app, "commit", "-q", "-m", "from the agent"); err != nil {
		t.Fatal(out)
	}
	if out, err := gitCmd(t, f, app, "push", "-q", "origin", "HEAD:main"); err != nil {
		t.Fatalf("push to listed repo with push:true: %v\n%s", err, out)
	}
	if log, _ := f.push.Log("acme/app", "main"); !strings.Contains(log, "from the agent") {
		t.Errorf("pushed commit not in the upstream repo: %q", log)
	}
	if out, err := gitCmd(t, f, app, "fetch", "-q", "origin"); err != nil {
		t.Errorf("fetch: %v\n%s", err, out)
	}

	// Push to an unlisted repo: refused by the gateway, never sent.
	before := len(f.push.Requests())
	out, err := gitCmd(t, f, app, "push", "https://push.test/evil/exfil.git", "HEAD:main")
	if err == nil || !strings.Contains(out, "403") {
		t.Errorf("push to an unlisted repo: %v\n%s", err, out)
	}
	if after := f.push.Requests(); len(after) != before {
		t.Errorf("the unlisted push reached the upstream: %+v", after[before:])
	}
	if log, _ := f.push.Log("evil/exfil", "main"); strings.Contains(log, "from the agent") {
		t.Error("the unlisted repo got the commit")
	}
	// git shows the refusal to the user as a "remote:" line.
	if !strings.Contains(out, "remote: devbox gateway: push.test/evil/exfil is not in credentials.git[1].repos") {
		t.Errorf("git's output does not name the policy key:\n%s", out)
	}
	if !strings.Contains(f.logs.String(), "push.test/evil/exfil is not in credentials.git[1].repos") {
		t.Errorf("gateway log does not name the policy key:\n%s", f.logs)
	}

	// Listed for fetch only (push: false): clone works, push is refused.
	if out, err := gitCmd(t, f, dir, "clone", "-q", "https://git.test/acme/ro", "ro"); err != nil {
		t.Fatalf("clone fetch-only repo: %v\n%s", err, out)
	}
	before = len(f.git.Requests())
	out, err = gitCmd(t, f, filepath.Join(dir, "ro"), "push", "origin", "HEAD:other")
	if err == nil || !strings.Contains(out, "403") {
		t.Errorf("push with push:false: %v\n%s", err, out)
	}
	if len(f.git.Requests()) != before {
		t.Error("the refused push reached the upstream")
	}
	if !strings.Contains(f.logs.String(), "credentials.git[0].push is false") {
		t.Errorf("gateway log:\n%s", f.logs)
	}
	// The user's token went upstream, as basic auth.
	for _, r := range append(f.git.Requests(), f.push.Requests()...) {
		if r.Authorization == "" || strings.Contains(r.Authorization, "attacker") {
			t.Errorf("upstream authorization %q", r.Authorization)
		}
	}
}

// TestStreamWhileRequestBodyStillSending: the upstream starts its SSE reply
// before the client has finished sending the request body. Without full
// duplex, net/http closes the request body at the first flushed response
// byte, the transport's body copy fails and the upstream connection is
// closed mid-stream (the truncated streams the gateway benchmark counted).
func TestStreamWhileRequestBodyStillSending(t *testing.T) {
	u := newUpstreams(t)
	u.serve(t, "api.anthropic.test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
			t.Errorf("upstream full duplex: %v", err)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\n\n")
		w.(http.Flusher).Flush()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			fmt.Fprintf(w, "event: error\ndata: %v\n\n", err)
			return
		}
		fmt.Fprintf(w, "event: body\ndata: %s\n\nevent: message_stop\n\n", body)
	}))
	g := New(testCreds(), &memSecrets{m: map[string]string{"anthropic": apiKey}}, WithTransport(u.transport()))
	s := httptest.NewServer(g)
	t.Cleanup(func() { s.CloseClientConnections(); s.Close() })

	// Without full duplex the exchange stalls: fail in seconds, not at the
	// test binary's timeout.
	done := make(chan error, 1)
	go func() { done <- streamWithLateBody(s.URL) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream stalled while the request body was still being sent")
	}
}

func streamWithLateBody(url string) error {
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", url+"/v1/messages", pr)
	go pw.Write([]byte(`{"first":"half",`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "event: message_start\n" {
		return fmt.Errorf("first line %q, %v", line, err)
	}
	// Only now does the rest of the request body leave the client.
	go func() {
		pw.Write([]byte(`"second":"half"}`))
		pw.Close()
	}()
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), `{"first":"half","second":"half"}`) || !strings.Contains(string(rest), "message_stop") {
		return fmt.Errorf("stream after the first event: %q, %v; want the whole body echoed and message_stop", rest, err)
	}
	return nil
}

// TestRoutesSkipUpstream: the routes' state with a verified handshake per
// upstream, and with SkipUpstream (the login banner) none at all: no
// connection leaves the gateway.
func TestRoutesSkipUpstream(t *testing.T) {
	u := newUpstreams(t)
	var conns atomic.Int32
	u.serve(t, "api.anthropic.test", http.NotFoundHandler())
	tr := u.transport()
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns.Add(1)
		return dial(ctx, network, addr)
	}
	creds := policy.Credentials{Anthropic: &policy.AnthropicCredential{Secret: "anthropic", Host: "api.anthropic.test"}}
	g := httptest.NewServer(New(creds, &memSecrets{m: map[string]string{"anthropic": apiKey}}, WithTransport(tr)))
	t.Cleanup(g.Close)
	addr := strings.TrimPrefix(g.URL, "http://")

	rs, err := QueryRoutes(context.Background(), addr, false)
	if err != nil || len(rs) != 1 || !rs[0].SecretSet || !rs[0].UpstreamSkipped || conns.Load() != 0 {
		t.Fatalf("routes without handshake: %+v, %v; %d upstream connections, want 0", rs, err, conns.Load())
	}
	rs, err = QueryRoutes(context.Background(), addr, true)
	if err != nil || len(rs) != 1 || rs[0].UpstreamSkipped || rs[0].Upstream != "" || conns.Load() != 1 {
		t.Fatalf("routes with handshake: %+v, %v; %d upstream connections, want 1", rs, err, conns.Load())
	}
}
