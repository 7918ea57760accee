//go:build linux

// Command devbox-escape runs devbox's escape suite inside a fenced
// container, as the agent's user: it tries every way out of the fence,
// checks the allowed destinations still work, prints a table and
// "N attempts, M escapes", and exits 1 when anything got out, an allowed
// destination broke, or a check could not be made.
//
//	devbox-escape --allow-url http://allowed.test:8080/ --deny-name denied.test:80 \
//	    --deny-addr 10.0.0.9:80 --tunnel-domain exfil.test --nonce abc123 --workspace /workspaces/repo
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/escape"
	"github.com/devbox-dev/devbox/internal/layout"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var t escape.Targets
	fs := flag.NewFlagSet("devbox-escape", flag.ExitOnError)
	fs.Var((*list)(&t.AllowedURLs), "allow-url", "URL that must answer 2xx (repeatable)")
	fs.Var((*list)(&t.AllowedNames), "allow-name", "name that must resolve (repeatable)")
	fs.Var((*list)(&t.DeniedNames), "deny-name", "non-allowed host:port to connect to (repeatable)")
	fs.Var((*list)(&t.DeniedAddrs), "deny-addr", "non-allowed ip:port to connect to (repeatable)")
	fs.Var((*list)(&t.OtherPorts), "other-port", "allowed ip on a non-allowed port, ip:port (repeatable)")
	fs.Var((*list)(&t.Resolvers), "resolver", "another DNS server ip:port to query (repeatable)")
	fs.Var((*list)(&t.IPv6), "ipv6", "IPv6 [addr]:port to connect to (repeatable)")
	fs.Var((*list)(&t.ICMP), "icmp", "address to ping (repeatable)")
	fs.Var((*list)(&t.UDP), "udp", "ip:port of a UDP echo server, e.g. on 443 for QUIC (repeatable)")
	fs.Var((*list)(&t.GatedNames), "gated-name", "allowed host:port to ask for another name in the TLS SNI and HTTP Host (repeatable)")
	fs.Var((*list)(&t.GatedUDP), "gated-udp", "allowed host:port with a UDP echo server: UDP to a name's address must be blocked (repeatable)")
	fs.StringVar(&t.Gateway, "gateway", "", "the credential gateway's ADDR (e.g. 127.0.0.1:53541): requests it must refuse itself")
	fs.Var((*list)(&t.ProtectedNames), "protected-name", "host:port only the credential gateway may reach (repeatable)")
	fs.StringVar(&t.Metadata, "metadata", "", "cloud metadata endpoint to try, e.g. 169.254.169.254:80 (only on a test network)")
	fs.StringVar(&t.TunnelDomain, "tunnel-domain", "", "a non-allowed domain for DNS tunnelling queries")
	fs.StringVar(&t.Nonce, "nonce", fmt.Sprintf("esc%x", time.Now().UnixNano()&0xffffffff), "marker put in every tunnelling query and UDP payload")
	fs.IntVar(&t.DNSFilterUID, "dns-uid", layout.DNSUID, "uid of the DNS filter")
	fs.Var((*list)(&t.DNSFilterAddrs), "dns-listen", "address the DNS filter listens on (repeatable)")
	fs.StringVar(&t.Workspace, "workspace", "", "the repository mounted in the container")
	fs.Var((*list)(&t.ReadDenied), "read-denied", "file the user must not read (repeatable; default /etc/shadow and /root)")
	fs.Var((*list)(&t.FenceFiles), "fence-file", "file the user must not change (repeatable; default the devbox binary, policy and status)")
	skip := fs.String("skip", "", "skip the checks whose name matches this `REGEXP` (e.g. 'DNS filter' once the test has stopped it)")
	timeout := fs.Duration("timeout", 2*time.Second, "time limit for each check")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "devbox-escape: unexpected arguments %q\n", fs.Args())
		os.Exit(2)
	}
	// As root every check "escapes", and the firewall checks would really
	// flush the firewall of whatever machine this runs on.
	if os.Geteuid() == 0 {
		fmt.Fprintln(os.Stderr, "devbox-escape: refusing to run as root: run it as the agent's user inside the container (devcontainer exec, docker exec -u USER)")
		os.Exit(2)
	}
	if len(t.ReadDenied) == 0 {
		t.ReadDenied = []string{"/etc/shadow", "/root"}
	}
	if len(t.FenceFiles) == 0 {
		t.FenceFiles = []string{layout.BinaryPath, layout.PolicyPath, layout.StatusPath, "/etc/resolv.conf"}
	}
	if len(t.DNSFilterAddrs) == 0 {
		t.DNSFilterAddrs = []string{"127.0.0.1:53535", "0.0.0.0:53535", "[::1]:53535", "[::]:53535"}
	}

	checks := escape.Checks(t)
	if *skip != "" {
		re, err := regexp.Compile(*skip)
		if err != nil {
			fmt.Fprintf(os.Stderr, "devbox-escape: --skip: %v\n", err)
			os.Exit(2)
		}
		kept := checks[:0]
		for _, c := range checks {
			if !re.MatchString(c.Name) {
				kept = append(kept, c)
			}
		}
		checks = kept
	}
	rep := escape.Run(context.Background(), checks, *timeout)
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		fmt.Printf("nonce: %s\n", t.Nonce)
		rep.WriteTable(os.Stdout)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}
