package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/secrets"
)

// Serve runs the gateway on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, Protocols: http1Only()}
	if g, ok := h.(*Gateway); ok {
		srv.ErrorLog = g.ErrorLog()
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			srv.Shutdown(sctx)
			cancel()
		case <-done:
		}
	}()
	err := srv.Serve(ln)
	close(done)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// http1Only is the one protocol the gateway speaks: HTTP/1.x, never h2c
// (prior knowledge or upgrade), whose frames it would not inspect.
func http1Only() *http.Protocols {
	var p http.Protocols
	p.SetHTTP1(true)
	return &p
}

// Files under StartOptions.StateDir.
const (
	pidFile = "gateway.pid"
	logFile = "gateway.log"
)

// StartOptions say how Start runs the gateway daemon.
type StartOptions struct {
	// Command runs the gateway in the foreground, e.g. {"/usr/local/bin/devbox",
	// "gateway", "run", "--policy", "/etc/devbox/policy.json"}. Required.
	Command []string
	// Addr is the loopback address it listens on (default layout.GatewayAddr).
	Addr string
	// UID and GID it runs as (default layout.GatewayUID). It gets no
	// capability: none is needed to bind a port above 1024 on loopback.
	UID, GID int
	// Env is its whole environment (default: empty). The secrets never go
	// there; only SSL_CERT_FILE-style settings and DEVBOX_SECRETS_DIR do.
	Env []string
	// StateDir holds the pidfile (default layout.RunDir); LogDir the log
	// (default layout.LogDir).
	StateDir, LogDir string
	// Wait bounds how long Start waits for the health answer (default 5s).
	Wait time.Duration
}

func (o *StartOptions) defaults() {
	if o.Addr == "" {
		o.Addr = layout.GatewayAddr
	}
	if o.UID == 0 && o.GID == 0 {
		o.UID, o.GID = layout.GatewayUID, layout.GatewayUID
	}
	if o.StateDir == "" {
		o.StateDir = layout.RunDir
	}
	if o.LogDir == "" {
		o.LogDir = layout.LogDir
	}
	if o.Wait == 0 {
		o.Wait = 5 * time.Second
	}
}

// Health asks the gateway at addr whether it serves.
func Health(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+HealthPath, nil)
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s", resp.Status)
	}
	return nil
}

func lastLines(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "; ")
}

// PassEnv are the variables the fence passes from its own environment to
// the gateway: where to find CA certificates (a corporate or test CA) and
// the secrets directory. Nothing else, so nothing the agent set can reach it.
var PassEnv = []string{"SSL_CERT_FILE", "SSL_CERT_DIR", "DEVBOX_SECRETS_DIR"}

// LaunchOptions are what the fence needs to bring the gateway up.
type LaunchOptions struct {
	Creds policy.Credentials
	// Store is the secrets directory; it is prepared (owner and modes
	// fixed) and, when it cannot be (a read-only mount), checked.
	Store secrets.Store
	// GitConfig is the system gitconfig the insteadOf block goes to
	// (default layout.GitConfigPath).
	GitConfig string
	Start     StartOptions
}

// QueryRoutes asks the gateway at addr for its routes' state, with the
// upstream handshakes when handshake is set (see SkipUpstream).
func QueryRoutes(ctx context.Context, addr string, handshake bool) ([]RouteStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	u := "http://" + addr + RoutesPath
	if !handshake {
		u += "?" + SkipUpstream
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []RouteStatus
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("gateway routes: %w", err)
	}
	return out, nil
}
