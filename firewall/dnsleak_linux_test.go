//go:build linux

package firewall

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/daemonpid"
	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// leakOut is what helperDNSLeak reports.
type leakOut struct {
	RunErr  string
	TCPFree []string // listen errors by address, "" when the port is free again
	UDPFree []string
}

// helperDNSLeak runs in a namespace of its own: it takes the NFLOG group
// first, so RunDNS fails at NFLOG after its listeners are up, then checks
// that the DNS port is free again on every address.
func helperDNSLeak() int {
	cfg, err := LoadConfig(argAfter("--config"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	held, err := openNFLOG(cfg.LogGroup)
	if err != nil {
		fmt.Fprintln(os.Stderr, "taking the NFLOG group:", err)
		return 1
	}
	defer held.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out leakOut
	// Root's sockets, as StartDNS hands them over.
	ls, err := daemonpid.Listen("DNS filter", dnsAddrs(cfg))
	if err == nil {
		err = ls.Export()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := RunDNS(ctx, cfg); err != nil {
		out.RunErr = err.Error()
	}
	for _, host := range []string{"127.0.0.1", "::1"} {
		addr := net.JoinHostPort(host, fmt.Sprint(cfg.DNSPort))
		msg := ""
		if l, err := net.Listen("tcp", addr); err != nil {
			msg = err.Error()
		} else {
			l.Close()
		}
		out.TCPFree = append(out.TCPFree, msg)
		msg = ""
		if pc, err := net.ListenPacket("udp", addr); err != nil {
			msg = err.Error()
		} else {
			pc.Close()
		}
		out.UDPFree = append(out.UDPFree, msg)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// TestRunDNSFailureClosesListeners: when NFLOG cannot be opened, RunDNS
// returns the error and its TCP and UDP listeners are gone with it.
func TestRunDNSFailureClosesListeners(t *testing.T) {
	devboxtest.RequireRoot(t)
	devboxtest.RequireBinary(t, "ip")
	ns := fmt.Sprintf("dbxleak-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cfg := Config{
		Allow:    []Destination{{Name: "a.test"}},
		Upstream: []netip.AddrPort{netip.MustParseAddrPort("192.0.2.53:53")},
		StateDir: dir,
		Log:      true,
	}.WithDefaults()
	raw, _ := json.Marshal(cfg)
	conf := filepath.Join(dir, "config.json")
	os.WriteFile(conf, raw, 0o644)
	self, _ := os.Executable()
	cmd := exec.Command("ip", "netns", "exec", ns, self, "--config", conf)
	cmd.Env = append(os.Environ(), helperEnv+"=dnsleak")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr.String())
	}
	var out leakOut
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("helper output %q: %v", b, err)
	}
	if !strings.Contains(out.RunErr, "nflog") {
		t.Fatalf("RunDNS error = %q, want the NFLOG failure", out.RunErr)
	}
	for i, host := range []string{"127.0.0.1", "::1"} {
		if out.TCPFree[i] != "" {
			t.Errorf("TCP %s:%d still taken after RunDNS failed: %s", host, cfg.DNSPort, out.TCPFree[i])
		}
		if out.UDPFree[i] != "" {
			t.Errorf("UDP %s:%d still taken after RunDNS failed: %s", host, cfg.DNSPort, out.UDPFree[i])
		}
	}
}
