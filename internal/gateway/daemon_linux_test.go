//go:build linux

package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/daemonpid"
	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/policy"
)

// squatEnv makes the test binary the agent on the gateway's port
// (devboxtest.Squat), answering every request 200 as a health check
// wants. It is read in init, before TestMain, so that this file needs
// nothing of TestMain's helpers.
const squatEnv = "DEVBOX_GATEWAY_TEST_SQUAT"

func init() {
	if os.Getenv(squatEnv) == "" {
		return
	}
	os.Exit(devboxtest.Squat(os.Args[1:], func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		}
	}))
}

// TestStart_PortNeverTheAgents: the agent (uid 1000) binds the gateway's
// port in a tight loop while the gateway restarts, and after it is
// killed, and never gets it; only with the gateway's holder killed too
// can it, and then its listener, though it answers the health check, is
// never taken for the gateway: Check says it is not running, and Start
// fails naming the port and uid 1000 instead of reporting a gateway.
func TestStart_PortNeverTheAgents(t *testing.T) {
	devboxtest.RequireRoot(t)
	devboxtest.RequireBinary(t, "setpriv")
	dir, devbox, probe := binDir(t, "devbox-gwd-")
	p, err := policy.Parse("policy", []byte(`{
	  "network": { "allow": ["api.anthropic.test:443"] },
	  "credentials": { "anthropic": { "secret": "anthropic", "host": "api.anthropic.test" } },
	}`))
	if err != nil {
		t.Fatal(err)
	}
	norm, _ := p.Normalize()
	policyFile := filepath.Join(dir, "policy.json")
	os.WriteFile(policyFile, norm, 0o644)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	o := gateway.StartOptions{
		Command:  []string{devbox, "gateway", "run", "--policy", policyFile, "--listen", addr},
		Addr:     addr,
		Env:      []string{"DEVBOX_SECRETS_DIR=" + filepath.Join(dir, "secrets")},
		StateDir: filepath.Join(dir, "run"),
		LogDir:   filepath.Join(dir, "log"),
	}
	t.Cleanup(func() { gateway.Stop(o.StateDir) })
	start := func() error {
		_, err := gateway.Start(context.Background(), o)
		return err
	}
	if err := start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	squat := func() *devboxtest.Squatter {
		cmd := exec.Command(probe, "tcp/"+addr)
		cmd.Env = []string{squatEnv + "=1"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, Groups: []uint32{}}}
		return devboxtest.StartSquat(t, cmd)
	}

	s := squat()
	for i := 0; i < 3; i++ {
		if err := start(); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
	}
	took, tries := s.Stop()
	if len(took) > 0 {
		t.Errorf("the agent took %q during 3 restarts", took)
	} else {
		t.Logf("the agent tried %d binds during 3 restarts, took none", tries)
	}
	if err := gateway.Check(o.StateDir); err != nil {
		t.Errorf("Check after the restarts: %v", err)
	}

	// Killed, its holder keeps the port; killed with its holder (only
	// root or its uid could do that), the agent gets it.
	pidfile := filepath.Join(o.StateDir, "gateway.pid")
	rec, err := daemonpid.Load(pidfile)
	if err != nil || rec.Alive("/proc") != nil || rec.HolderAlive("/proc") != nil {
		t.Fatalf("gateway not running: %+v %v", rec, err)
	}
	s = squat()
	syscall.Kill(rec.PID, syscall.SIGKILL)
	for i := 0; rec.Alive("/proc") == nil; i++ {
		if i == 100 {
			t.Fatal("the gateway survived SIGKILL")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if took, tries := s.Stop(); len(took) > 0 || tries == 0 {
		t.Errorf("the agent took %q in %d tries with the gateway dead and its holder alive", took, tries)
	}
	if err := gateway.Health(context.Background(), addr); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("health with the gateway dead: %v, want connection refused", err)
	}
	s = squat()
	syscall.Kill(rec.Holder, syscall.SIGKILL)
	if l := s.Next(); l != "took tcp "+addr {
		t.Fatalf("squatter: %q", l)
	}
	if err := gateway.Health(context.Background(), addr); err != nil {
		t.Fatalf("the squatter does not answer the health check (%v): the test proves nothing", err)
	}
	if err := gateway.Check(o.StateDir); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("Check with the gateway dead and the agent on its port = %v", err)
	}
	if err := start(); err == nil || !strings.Contains(err.Error(), "tcp "+addr+" is taken") || !strings.Contains(err.Error(), "uid 1000") {
		t.Errorf("Start with the agent on the port = %v, want a failure naming the port and uid 1000", err)
	}
	if _, alive := gateway.PID(o.StateDir); alive {
		t.Error("a gateway runs while the agent holds its port")
	}
	s.Stop()
	if err := start(); err != nil {
		t.Errorf("Start once the agent left: %v", err)
	}
}
