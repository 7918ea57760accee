//go:build linux

package escape

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/policy"
)

type oneSecret string

func (s oneSecret) Secret(string) ([]byte, error) { return []byte(s), nil }

// gatewayChecks runs the suite's gateway checks against addr.
func gatewayChecks(t *testing.T, addr string) Report {
	t.Helper()
	var cs []Check
	for _, c := range Checks(Targets{Gateway: addr}) {
		if strings.HasPrefix(c.Name, "credential gateway: ") {
			cs = append(cs, c)
		}
	}
	if len(cs) != len(gatewayAttempts) {
		t.Fatalf("%d gateway checks, want %d", len(cs), len(gatewayAttempts))
	}
	return Run(context.Background(), cs, 2*time.Second)
}

// TestGatewayAttempts: the real gateway refuses every attempt itself; a
// plain reverse proxy in its place (the gateway as it was: methods,
// upgrades and queries forwarded as sent) is caught escaping.
func TestGatewayAttempts(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		mu.Unlock()
		if r.Header.Get("Upgrade") != "" {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", r.Header.Get("Upgrade"))
			w.WriteHeader(http.StatusSwitchingProtocols)
			return
		}
		fmt.Fprintf(w, "echo %s %s %v", r.Method, r.URL, r.Header)
	}))
	t.Cleanup(up.Close)
	upAddr := up.Listener.Addr().String()
	tr := gateway.DefaultTransport()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, upAddr)
	}
	creds := policy.Credentials{
		Anthropic: &policy.AnthropicCredential{Secret: "a", Host: "api.anthropic.test"},
		Git:       []policy.GitCredential{{Host: "x.test", Secret: "g", Repos: []string{"a/b"}}},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go gateway.Serve(ctx, ln, gateway.New(creds, oneSecret("sk-ant-api03-user"), gateway.WithTransport(tr)))

	r := gatewayChecks(t, ln.Addr().String())
	mu.Lock()
	defer mu.Unlock()
	if r.Escapes != 0 || r.Invalid != 0 || len(seen) != 0 {
		var b strings.Builder
		r.WriteTable(&b)
		t.Errorf("against the gateway: %s; upstream saw %q\n%s", r.Summary(), seen, b.String())
	}

	u, _ := url.Parse(up.URL)
	naive := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	t.Cleanup(naive.Close)
	mu.Unlock()
	r = gatewayChecks(t, naive.Listener.Addr().String())
	mu.Lock()
	t.Logf("a plain reverse proxy in the gateway's place: %s", r.Summary())
	if r.Escapes < 4 {
		var b strings.Builder
		r.WriteTable(&b)
		t.Errorf("a plain reverse proxy: %s, want at least 4 escapes\n%s", r.Summary(), b.String())
	}
}
