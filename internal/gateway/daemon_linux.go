//go:build linux

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/devbox-dev/devbox/internal/daemonpid"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/secrets"
)

// Harden makes the calling process undumpable: no core dump, and its
// /proc/PID/{environ,mem,maps} and ptrace become root's alone, even for a
// process of the same uid. The gateway calls it before it reads a secret.
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("gateway: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	var lim unix.Rlimit
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &lim); err != nil {
		return fmt.Errorf("gateway: setrlimit(RLIMIT_CORE, 0): %w", err)
	}
	return nil
}

// Serve runs the gateway on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
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

// Start (re)starts the gateway daemon detached, under its own uid, and
// returns its pid once it answers on Addr. An earlier daemon named by the
// pidfile is stopped first. Its output goes to LogDir/gateway.log.
func Start(ctx context.Context, o StartOptions) (int, error) {
	if len(o.Command) == 0 {
		return 0, errors.New("gateway: Start needs StartOptions.Command")
	}
	o.defaults()
	if err := Stop(o.StateDir); err != nil {
		return 0, err
	}
	for _, d := range []string{o.StateDir, o.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, fmt.Errorf("gateway: %w", err)
		}
	}
	logPath := filepath.Join(o.LogDir, logFile)
	lf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return 0, fmt.Errorf("gateway: %w", err)
	}
	defer lf.Close()
	return daemonpid.Start(ctx, daemonpid.Spec{
		Name:    "gateway",
		Argv:    o.Command,
		Env:     o.Env,
		Dir:     "/",
		UID:     o.UID,
		GID:     o.GID,
		Output:  lf,
		PIDFile: filepath.Join(o.StateDir, pidFile),
		Wait:    o.Wait,
		Poll:    10 * time.Millisecond,
		Ready:   func(ctx context.Context, _ int) error { return Health(ctx, o.Addr) },
		Tail:    func() string { return lastLines(logPath) },
	})
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

// PID returns the pid in stateDir's pidfile and whether that process is
// the gateway Start started (alive, and started when the pidfile says: a
// pid alone may name a process of a later container start).
func PID(stateDir string) (int, bool) {
	return daemonpid.Read(filepath.Join(stateDir, pidFile), "/proc")
}

// Stop stops the gateway named by stateDir's pidfile, if it runs.
func Stop(stateDir string) error {
	if err := daemonpid.Stop(filepath.Join(stateDir, pidFile)); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	return nil
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

// Launch brings the gateway up for a policy, as root, on every container
// start: secrets directory, git's system config, then the daemon. With no
// credentials it stops any gateway and removes the git block. It returns
// the daemon's pid (0 when none runs).
func Launch(ctx context.Context, o LaunchOptions) (int, error) {
	if o.GitConfig == "" {
		o.GitConfig = layout.GitConfigPath
	}
	o.Start.defaults()
	if err := WriteGitConfig(o.GitConfig, GitConfig(o.Creds, o.Start.Addr)); err != nil {
		return 0, err
	}
	if o.Creds.IsZero() {
		return 0, Stop(o.Start.StateDir)
	}
	if err := o.Store.Prepare(); err != nil {
		// A mounted directory may be read-only: acceptable only when no
		// one else can read it already.
		if cerr := o.Store.Check(); cerr != nil {
			return 0, fmt.Errorf("%v; and %w", err, cerr)
		}
	}
	if err := o.Store.Check(); err != nil {
		return 0, err
	}
	return Start(ctx, o.Start)
}

// QueryRoutes asks the gateway at addr for its routes' state.
func QueryRoutes(ctx context.Context, addr string) ([]RouteStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+RoutesPath, nil)
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
