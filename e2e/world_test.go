package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// world is the test's internet: two worldd containers on an --internal
// network with IPv6. W1 is the allowed host (allowed.test) and the DNS
// server every devbox container uses; W2 is a host the policy does not
// allow and a second resolver.
type world struct {
	d       devboxtest.Docker
	Net     string
	W1, W2  string // IPv4 addresses
	W1v6    string // IPv6 addresses
	W2v6    string
	Nonce   string // marks this run's tunnelling queries
	prefix4 string // "10.231.N.": the network's IPv4 /24
	names   []string
	stopped bool
	// env and mounts are added to every dev container's devcontainer.json
	// (patchConfig): what a test's own servers need from the container.
	env    map[string]string
	mounts []string
}

// IP is host number i (1–254) of the world's IPv4 network: W1 is .2, W2
// .3, and Docker hands the dev containers the next free ones from the
// bottom: a test's own servers take numbers from the top (.250).
func (w *world) IP(i int) string { return fmt.Sprintf("%s%d", w.prefix4, i) }

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// goBuild builds a main package of this module, static, into dir.
func goBuild(t testing.TB, pkg, dir string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// startWorld creates the network and the two world containers from the
// base image, with the worldd binary bind-mounted read-only. records are
// more DNS records ("NAME TYPE TTL VALUE") W1 serves, made once the
// network's addresses are known.
func startWorld(t testing.TB, d devboxtest.Docker, base, worldd string, records ...func(w *world) []string) *world {
	t.Helper()
	return startWorldWith(t, d, base, worldd, worldOptions{Records: records})
}

// worldOptions change the world for one engine or test.
type worldOptions struct {
	// Prefix4 and Prefix6 start the network's subnets (default "10.231"
	// and "fd7e:db0"): another engine on the same host gets prefixes of
	// its own, so its bridges never overlap dockerd's.
	Prefix4, Prefix6 string
	// Records are startWorld's records.
	Records []func(w *world) []string
	// Files are served by W1 over HTTP (worldd -files).
	Files []worldFiles
}

// worldFiles has W1 serve the files under Dir over HTTP on Port, as Names:
// each resolves to W1 in the world's DNS.
type worldFiles struct {
	Dir   string
	Port  int
	Names []string
}

// startWorldWith is startWorld with options.
func startWorldWith(t testing.TB, d devboxtest.Docker, base, worldd string, o worldOptions) *world {
	t.Helper()
	if o.Prefix4 == "" {
		o.Prefix4, o.Prefix6 = "10.231", "fd7e:db0"
	}
	w := &world{d: d, Nonce: "n" + randHex(6)}
	// A /24 and a ULA /64 that no other network on this daemon uses:
	// try a few random ones.
	var err error
	for i := 0; i < 10; i++ {
		n := 1 + int(randHex(1)[0])%200 + i
		w.Net = "dbx-e2e-" + randHex(4)
		sub4 := fmt.Sprintf("%s.%d.0/24", o.Prefix4, n)
		sub6 := fmt.Sprintf("%s:%x::/64", o.Prefix6, n)
		out, cerr := d.Command(context.Background(), "network", "create", "--internal", "--ipv6",
			"--subnet", sub4, "--subnet", sub6, w.Net).CombinedOutput()
		if cerr == nil {
			w.W1, w.W2 = fmt.Sprintf("%s.%d.2", o.Prefix4, n), fmt.Sprintf("%s.%d.3", o.Prefix4, n)
			w.W1v6, w.W2v6 = fmt.Sprintf("%s:%x::2", o.Prefix6, n), fmt.Sprintf("%s:%x::3", o.Prefix6, n)
			w.prefix4 = fmt.Sprintf("%s.%d.", o.Prefix4, n)
			err = nil
			break
		}
		err = fmt.Errorf("%s network create: %v: %s", filepath.Base(d.Path), cerr, out)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Command(context.Background(), "network", "rm", w.Net).Run() })
	if out, err := d.Command(context.Background(), "network", "inspect", "--format", "{{.Internal}}", w.Net).Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Fatalf("network %s is not internal (%q, %v): refusing to go on", w.Net, out, err)
	}
	zone := []string{
		"allowed.test A 60 " + w.W1,
		"denied.test A 60 " + w.W2,
	}
	for _, r := range o.Records {
		zone = append(zone, r(w)...)
	}
	for _, f := range o.Files {
		for _, n := range f.Names {
			zone = append(zone, n+" A 60 "+w.W1)
		}
	}
	for i, ip := range [][2]string{{w.W1, w.W1v6}, {w.W2, w.W2v6}} {
		name := fmt.Sprintf("%s-w%d", w.Net, i+1)
		args := []string{"run", "-d", "--name", name, "--network", w.Net, "--ip", ip[0], "--ip6", ip[1],
			"--sysctl", "net.ipv6.conf.all.disable_ipv6=0",
			"-v", worldd + ":/usr/local/bin/worldd:ro"}
		var serve []string
		if i == 0 {
			for j, f := range o.Files {
				dir := fmt.Sprintf("/srv/files%d", j)
				args = append(args, "-v", f.Dir+":"+dir+":ro")
				serve = append(serve, "-files", fmt.Sprintf("%d=%s", f.Port, dir))
			}
		}
		// 8080 (allowed.test's port) serves a site recorder: it says in
		// each answer which names it read, so the name gate's adversary
		// cases are judged by the world (escape.Targets.GatedNames).
		args = append(append(args, base, "/usr/local/bin/worldd", "-addr", ip[0], "-addr", ip[1], "-tcp", "80,443", "-sites", "8080"), serve...)
		for _, r := range zone {
			args = append(args, "-record", r)
		}
		d.Run(t, args...)
		w.names = append(w.names, name)
		t.Cleanup(func() { d.Command(context.Background(), "rm", "-f", name).Run() })
	}
	for _, name := range w.names {
		waitFor(t, 30*time.Second, name+" ready", func() (bool, string) {
			out, _ := d.Command(context.Background(), "logs", name).CombinedOutput()
			return strings.Contains(string(out), "worldd: ready"), string(out)
		})
	}
	return w
}

// log stops the world (worldd prints what it saw when it stops) and
// returns every query and connection line of both servers.
func (w *world) log(t testing.TB) string {
	t.Helper()
	if !w.stopped {
		for _, name := range w.names {
			w.d.Run(t, "stop", "-t", "10", name)
		}
	}
	w.stopped = true
	return w.peek(t)
}

// peek returns what both servers printed so far (every line as it
// happened), leaving them running.
func (w *world) peek(t testing.TB) string {
	t.Helper()
	var all strings.Builder
	for _, name := range w.names {
		out, err := w.d.Command(context.Background(), "logs", name).CombinedOutput()
		if err != nil {
			t.Fatalf("docker logs %s: %v", name, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			all.WriteString(name + ": " + line + "\n")
		}
	}
	return all.String()
}

// runArgs put a dev container on the world's network with the world's DNS.
func (w *world) runArgs() []string {
	return []string{"--network", w.Net, "--dns", w.W1, "--sysctl", "net.ipv6.conf.all.disable_ipv6=0"}
}

// containerEnv points the entrypoint's self-test at the world, plus the
// test's own w.env.
func (w *world) containerEnv() map[string]string {
	env := map[string]string{
		"DEVBOX_VERIFY_ALLOWED": "allowed.test:8080",
		"DEVBOX_VERIFY_DENIED":  w.W2 + ":8080," + w.W1 + ":80",
	}
	for k, v := range w.env {
		env[k] = v
	}
	return env
}

// escapeArgs are devbox-escape's targets in this world.
func (w *world) escapeArgs(workspace string) []string {
	a := []string{
		"--allow-name", "allowed.test",
		"--allow-url", "http://allowed.test:8080/",
		"--deny-name", "denied.test:8080", "--deny-name", "nowhere.test:80",
		"--deny-addr", w.W2 + ":8080", "--deny-addr", w.W2 + ":80",
		"--other-port", w.W1 + ":80", "--other-port", w.W1 + ":443",
		"--resolver", w.W2 + ":53", "--resolver", w.W1 + ":53",
		"--ipv6", "[" + w.W1v6 + "]:8080", "--ipv6", "[" + w.W2v6 + "]:8080",
		"--icmp", w.W1, "--icmp", w.W2, "--icmp", w.W1v6,
		"--udp", w.W1 + ":443", "--udp", w.W2 + ":443", "--udp", w.W1 + ":5000",
		"--gated-name", "allowed.test:8080",
		"--metadata", "169.254.169.254:80",
		"--tunnel-domain", "exfil.test", "--nonce", w.Nonce,
		"--read-denied", "/etc/shadow", "--read-denied", "/root/devbox-secret",
	}
	if workspace != "" {
		a = append(a, "--workspace", workspace)
	}
	return a
}

// waitFor polls cond until it holds or the limit passes. The limit is a
// bound on a hang, not a timed assertion.
func waitFor(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last string
	for {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v; last: %s", what, limit, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
