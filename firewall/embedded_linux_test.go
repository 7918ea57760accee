//go:build linux

package firewall

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// Docker's embedded DNS, as it runs in a container on a user-defined
// network: resolv.conf says 127.0.0.11, nat OUTPUT DNATs 127.0.0.11:53 to a
// resolver socket on a high port of 127.0.0.11, and that resolver — opened by
// dockerd, so owned by uid 0 — forwards each query, unmarked, from inside the
// container's namespace to the external server. The ports are Docker's kind
// of random high ports, fixed here so the DNAT can name them.
const (
	embeddedUDPPort = 43391
	embeddedTCPPort = 39925
)

// dockerNAT is what dockerd loads into a container's nat table (iptables-save
// of a container on a user-defined network, ports replaced).
var dockerNAT = fmt.Sprintf(`*nat
:DOCKER_OUTPUT - [0:0]
:DOCKER_POSTROUTING - [0:0]
-A OUTPUT -d 127.0.0.11/32 -j DOCKER_OUTPUT
-A POSTROUTING -d 127.0.0.11/32 -j DOCKER_POSTROUTING
-A DOCKER_OUTPUT -d 127.0.0.11/32 -p tcp -m tcp --dport 53 -j DNAT --to-destination 127.0.0.11:%[2]d
-A DOCKER_OUTPUT -d 127.0.0.11/32 -p udp -m udp --dport 53 -j DNAT --to-destination 127.0.0.11:%[1]d
-A DOCKER_POSTROUTING -s 127.0.0.11/32 -p tcp -m tcp --sport %[2]d -j SNAT --to-source :53
-A DOCKER_POSTROUTING -s 127.0.0.11/32 -p udp -m udp --sport %[1]d -j SNAT --to-source :53
COMMIT
`, embeddedUDPPort, embeddedTCPPort)

// helperEmbeddedDNS is the simulated dockerd resolver: it listens on
// 127.0.0.11 (UDP and TCP high ports) and forwards every query, over the
// transport it came on and without any mark, to the server named by its
// argument. It prints "ready" once both sockets are open.
func helperEmbeddedDNS(args []string) int {
	if len(args) != 1 {
		return 1
	}
	upstream := args[0]
	forward := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		network := "udp"
		if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
			network = "tcp"
		}
		c := &dns.Client{Net: network, Timeout: 2 * time.Second}
		resp, _, err := c.Exchange(r, upstream)
		if err != nil {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeServerFailure)
			w.WriteMsg(m)
			return
		}
		w.WriteMsg(resp)
	})
	pc, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.11:%d", embeddedUDPPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.11:%d", embeddedTCPPort))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go (&dns.Server{PacketConn: pc, Handler: forward}).ActivateAndServe()
	go (&dns.Server{Listener: l, Handler: forward}).ActivateAndServe()
	fmt.Println("ready")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	<-ctx.Done()
	return 0
}

// newDockerFence builds a world whose client looks like a container on a
// user-defined Docker network — resolv.conf naming 127.0.0.11, Docker's
// DNAT, and the embedded resolver forwarding to the world's DNS — and
// applies cfg with its default upstream (resolv.conf) as the entrypoint does.
func newDockerFence(t *testing.T, cfg Config) *fence {
	t.Helper()
	f := newWorld(t, cfg)
	resolv := filepath.Join("/etc/netns", f.w.Client, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.11\noptions ndots:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	restoreNAT := f.w.Command(context.Background(), "iptables-restore", "--noflush", "--wait")
	restoreNAT.Stdin = strings.NewReader(dockerNAT)
	if out, err := restoreNAT.CombinedOutput(); err != nil {
		t.Fatalf("load Docker's nat rules: %v\n%s", err, out)
	}
	// Started as root with no mark, as dockerd's resolver socket is.
	cmd := f.w.Command(context.Background(), f.bin, testworld.DNSAddr.String())
	cmd.Env = []string{helperEnv + "=embedded", "PATH=" + os.Getenv("PATH")}
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("the simulated embedded resolver did not start: %q", line)
	}
	f.mustApply()
	return f
}

// TestFence_DockerEmbeddedDNSResolves is the loop bug: with the default
// upstream (resolv.conf → 127.0.0.11) the embedded resolver's unmarked
// forward used to be redirected back to the filter, so no allowed name
// resolved. Allowed names must resolve through it, over UDP and TCP, and
// refused names must still never reach the world.
func TestFence_DockerEmbeddedDNSResolves(t *testing.T) {
	f := newDockerFence(t, Config{Allow: []Destination{allowName("api.test"), {Name: "wild.test", Wildcard: true}}})
	if len(f.apply.Warnings) != 0 {
		t.Errorf("apply could not pre-resolve the policy's names: %q", f.apply.Warnings)
	}
	// A program reading resolv.conf asks 127.0.0.11:53.
	if rc, ans := f.lookupVia("127.0.0.11:53", "x.wild.test", "A", "udp"); rc != "NOERROR" || len(ans) != 1 || ans[0] != hostWild.String() {
		t.Errorf("x.wild.test via 127.0.0.11 over UDP = %s %v, want %s", rc, ans, hostWild)
	}
	if rc, ans := f.lookupVia("127.0.0.11:53", "evil.wild.test", "A", "tcp"); rc != "NOERROR" || len(ans) != 1 || ans[0] != hostOther.String() {
		t.Errorf("evil.wild.test via 127.0.0.11 over TCP = %s %v, want %s", rc, ans, hostOther)
	}
	if out, ok := f.probe("connect", "api.test:80"); !ok {
		t.Errorf("connect api.test:80 through the system resolver: %s", out)
	}
	f.mustConnect(ap(hostWild, 443))
	if rc, _ := f.lookupVia("127.0.0.11:53", "other.test", "A", "udp"); rc != "REFUSED" {
		t.Errorf("other.test via 127.0.0.11: %s, want REFUSED", rc)
	}
	// The world's DNS host resolves from no allowed name: the exemption
	// for port 53 opens nothing else.
	f.mustBlock(ap(testworld.HostsV4[0], 8080))

	// The world saw the allowed queries, from the client, on the transport
	// they were asked on: the embedded resolver forwarded them.
	seen := map[string]bool{}
	for _, q := range f.w.DNS.Queries() {
		if q.From.Addr() != testworld.ClientV4 {
			t.Errorf("query from %v, want the client %v: %+v", q.From, testworld.ClientV4, q)
		}
		if q.Name == "other.test" {
			t.Errorf("a refused name reached the world: %+v", q)
		}
		seen[q.Name+"/"+q.Type+"/"+q.Net] = true
	}
	for _, want := range []string{"api.test/A/udp", "x.wild.test/A/udp", "evil.wild.test/A/tcp"} {
		if !seen[want] {
			t.Errorf("the world never saw %s; it saw %v", want, seen)
		}
	}
	st := f.status()
	if h := st.Daemon.Health; h == nil || h.UpstreamErrors != 0 || h.Forwarded == 0 || strings.Join(h.Upstreams, ",") != DockerDNS.String() {
		t.Errorf("filter health %+v: want upstream %s, forwarded queries and no upstream errors", h, DockerDNS)
	}
	// The forwards went out through the exemption, and status shows it
	// with its counters.
	exempt := map[string]uint64{}
	for _, fs := range st.Families {
		for _, r := range fs.Rules {
			if strings.Contains(r.Rule, "owner UID match 0") {
				exempt[fs.Family+" "+r.Rule] = r.Packets
			}
		}
	}
	if len(exempt) != 4 {
		t.Errorf("status shows %d uid-0 exemption rules, want UDP and TCP in both families: %v", len(exempt), exempt)
	}
	var used uint64
	for r, n := range exempt {
		if strings.HasPrefix(r, "ipv4 ") {
			used += n
		}
	}
	if used == 0 {
		t.Errorf("no packet matched the IPv4 exemption: %v", exempt)
	}
}

// TestFence_DockerEmbeddedDNSAgentCannotBypass checks that the exemption
// for dockerd's forwards (uid 0) gives the agent's user nothing: uid 1000
// with no capabilities, and uid 1000 as root of its own user namespace, can
// send DNS nowhere but the filter — not to the world's DNS directly, not to
// the embedded resolver's high ports.
func TestFence_DockerEmbeddedDNSAgentCannotBypass(t *testing.T) {
	devboxtest.RequireBinary(t, "setpriv")
	devboxtest.RequireBinary(t, "unshare")
	f := newDockerFence(t, Config{Allow: []Destination{allowName("api.test")}})
	agent := []string{"setpriv", "--reuid", "1000", "--regid", "1000", "--clear-groups", "--inh-caps=-all", "--"}
	users := []struct {
		name string
		wrap []string
		id   string // what `id -u` prints under wrap
	}{
		{"uid 1000", agent, "1000"},
		{"uid 1000 as root of a user namespace", append(append([]string(nil), agent...), "unshare", "--user", "--map-root-user", "--"), "0"},
	}
	for _, u := range users {
		for i, network := range []string{"udp", "tcp"} {
			name := fmt.Sprintf("c2VjcmV0-%d.%s.exfil.test", i, strings.ReplaceAll(u.name, " ", "-"))
			// Straight at a world resolver: the redirect hands it to the
			// filter, which refuses it.
			for _, server := range []string{testworld.DNSAddr.String(), "10.77.0.2:53", "[fd77::1]:53"} {
				if out, ok := f.probeWrapped(u.wrap, "dns", server, name, "TXT", network); !ok || !strings.HasPrefix(out, "REFUSED") {
					t.Errorf("%s: %s query via %s: %q (ok=%v), want REFUSED by the filter", u.name, network, server, out, ok)
				}
			}
			// At the embedded resolver's own socket, behind Docker's DNAT.
			port := embeddedUDPPort
			if network == "tcp" {
				port = embeddedTCPPort
			}
			server := fmt.Sprintf("127.0.0.11:%d", port)
			if out, ok := f.probeWrapped(u.wrap, "dns", server, name, "TXT", network); ok {
				t.Errorf("%s: %s query to the embedded resolver's port %s was answered: %q", u.name, network, server, out)
			}
		}
		// The probes ran as the case says: the user namespace's root is
		// uid 0 to itself, and still not to the owner match.
		if out, err := f.clientRun(append(append([]string(nil), u.wrap...), "id", "-u")...); err != nil || strings.TrimSpace(out) != u.id {
			t.Errorf("%s: id -u = %q (%v), want %s", u.name, out, err, u.id)
		}
	}
	for _, q := range f.w.DNS.Queries() {
		if strings.Contains(q.Name, "exfil") {
			t.Errorf("the agent's query reached the world: %+v", q)
		}
	}
	if rc, ans := f.lookupVia("127.0.0.11:53", "api.test", "A", "udp"); rc != "NOERROR" || len(ans) != 1 {
		t.Errorf("api.test after the attempts: %s %v", rc, ans)
	}
}

// probeWrapped runs a probe in the client under the wrapper argv (setpriv,
// unshare …); it returns the output and whether the probe succeeded.
func (f *fence) probeWrapped(wrap []string, args ...string) (string, bool) {
	f.t.Helper()
	argv := append(append(append([]string(nil), wrap...), f.bin), args...)
	cmd := f.w.Command(context.Background(), argv...)
	cmd.Env = []string{helperEnv + "=probe", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
			return strings.TrimSpace(string(out)), false
		}
		f.t.Fatalf("probe %v as %v: %v\n%s", args, wrap, err, out)
	}
	return strings.TrimSpace(string(out)), true
}
