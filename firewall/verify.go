package firewall

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Targets are the probes Verify runs. Names in Allowed and Denied resolve
// through the system resolver, hence through the DNS filter.
type Targets struct {
	// Allowed host:port pairs must accept a TCP connection.
	Allowed []string
	// Denied host:port pairs must fail to connect (rejected, or refused at
	// DNS for a name).
	Denied []string
	// Refused names must get REFUSED from whatever resolver is asked.
	Refused []string
	// Resolver is the address queried for Refused names (default: the
	// first nameserver of cfg.ResolvConf, port 53, which the rules
	// redirect to the filter).
	Resolver string
}

// Check is one probe's outcome.
type Check struct {
	Kind   string `json:"kind"` // "allowed", "denied", "refused", "daemon", "gate"
	Target string `json:"target"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// VerifyError lists the probes that failed.
type VerifyError struct{ Failed []Check }

func (e *VerifyError) Error() string {
	var s []string
	for _, c := range e.Failed {
		s = append(s, fmt.Sprintf("%s %s: %s", c.Kind, c.Target, c.Detail))
	}
	return "firewall: verify failed: " + strings.Join(s, "; ")
}

var _ error = (*VerifyError)(nil)

// Verify proves the fence from inside: the DNS filter answers, every
// Allowed target connects, every Denied one does not, and every Refused
// name is refused. It returns all checks, and a *VerifyError when any failed.
func Verify(ctx context.Context, cfg Config, t Targets) ([]Check, error) {
	cfg = cfg.WithDefaults()
	var checks []Check
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	h, err := QueryHealth(hctx, net.JoinHostPort("127.0.0.1", fmt.Sprint(cfg.DNSPort)))
	cancel()
	if err == nil {
		pid, alive := DaemonPID(cfg)
		err = ownAnswer("DNS filter", h.PID, pid, alive, CheckDNS(cfg))
	}
	if err != nil {
		checks = append(checks, Check{"daemon", "dns filter", false, err.Error()})
	} else {
		checks = append(checks, Check{"daemon", "dns filter", true, fmt.Sprintf("pid %d answers from its own sockets, upstreams %s", h.PID, strings.Join(h.Upstreams, ","))})
	}
	if cfg.Gate {
		checks = append(checks, verifyGate(ctx, cfg)...)
	}
	dial := func(target string) error {
		d := net.Dialer{Timeout: 3 * time.Second}
		c, err := d.DialContext(ctx, "tcp", target)
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, a := range t.Allowed {
		if err := dial(a); err != nil {
			checks = append(checks, Check{"allowed", a, false, "did not connect: " + err.Error()})
		} else {
			checks = append(checks, Check{"allowed", a, true, "connected"})
		}
	}
	for _, a := range t.Denied {
		if err := dial(a); err != nil {
			checks = append(checks, Check{"denied", a, true, "blocked: " + err.Error()})
		} else {
			checks = append(checks, Check{"denied", a, false, "CONNECTED: the fence let it through"})
		}
	}
	resolver := t.Resolver
	if resolver == "" && len(t.Refused) > 0 {
		c := Config{ResolvConf: cfg.ResolvConf}
		if ups, err := c.upstreams(); err == nil {
			resolver = ups[0].String()
		} else {
			resolver = "127.0.0.1:53"
		}
	}
	for _, n := range t.Refused {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(n), dns.TypeA)
		r, _, err := (&dns.Client{Timeout: 3 * time.Second}).ExchangeContext(ctx, m, resolver)
		switch {
		case err != nil:
			checks = append(checks, Check{"refused", n, false, "no answer from " + resolver + ": " + err.Error()})
		case r.Rcode == dns.RcodeRefused:
			checks = append(checks, Check{"refused", n, true, "REFUSED"})
		default:
			checks = append(checks, Check{"refused", n, false, "answered " + dns.RcodeToString[r.Rcode] + " by " + resolver})
		}
	}
	var failed []Check
	for _, c := range checks {
		if !c.OK {
			failed = append(failed, c)
		}
	}
	if failed != nil {
		return checks, &VerifyError{Failed: failed}
	}
	return checks, nil
}

// ownAnswer says whether a daemon's health answer proves it serves: the
// pid that answered is the one its pidfile records (pid, alive), and owns
// (CheckDNS, CheckGate, asked after the answer) found its sockets the only
// ones at its addresses. Whoever else answers on its port is a failure.
func ownAnswer(name string, answered, pid int, alive bool, owns error) error {
	switch {
	case !alive && owns != nil:
		return fmt.Errorf("pid %d answers, but %w", answered, owns)
	case !alive:
		return fmt.Errorf("pid %d answers, but no %s runs (its pidfile names no live process of its uid)", answered, name)
	case answered != pid:
		return fmt.Errorf("pid %d answers, not the %s (pid %d)", answered, name, pid)
	}
	return owns
}

// gateCheckName is the SNI verify sends to an allowed name's address: .invalid
// is reserved (RFC 6761), so no policy allows it.
const gateCheckName = "gate-check.devbox.invalid"

// verifyGate checks the name gate answers and refuses a mismatched SNI: a
// TLS connection to the first exact allowed name that resolves, asking for
// gateCheckName, must fail and be counted by the gate as not-allowed.
func verifyGate(ctx context.Context, cfg Config) []Check {
	health := func() (GateHealth, error) {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return QueryGateHealth(hctx, gateAddr(cfg))
	}
	h, err := health()
	if err == nil {
		pid, alive := GatePID(cfg)
		err = ownAnswer("name gate", h.PID, pid, alive, CheckGate(cfg))
	}
	if err != nil {
		return []Check{{"daemon", "name gate", false, err.Error()}}
	}
	out := []Check{{"daemon", "name gate", true, fmt.Sprintf("pid %d answers from its own sockets, %d passed, %d refused", h.PID, h.Passed, h.Refused)}}
	target := ""
	for _, d := range cfg.Allow {
		if d.Name == "" || d.Wildcard {
			continue
		}
		port := d.Port
		if port == 0 {
			port = 443
		}
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		addrs, err := net.DefaultResolver.LookupNetIP(lctx, "ip", d.Name)
		cancel()
		for _, a := range addrs {
			// An address a static entry allows is not behind the gate.
			if a = a.Unmap(); err == nil && !cfg.staticAllows(a, port) {
				target = net.JoinHostPort(a.String(), strconv.Itoa(int(port)))
				break
			}
		}
		if target != "" {
			break
		}
	}
	what := "SNI " + gateCheckName
	if target == "" {
		return append(out, Check{"gate", what, true, "no exact allowed name resolves: nothing to send it to"})
	}
	what += " to " + target
	d := &net.Dialer{Timeout: 3 * time.Second}
	c, herr := tls.DialWithDialer(d, "tcp", target, &tls.Config{ServerName: gateCheckName, InsecureSkipVerify: true})
	if herr == nil {
		c.Close()
		return append(out, Check{"gate", what, false, "HANDSHAKE COMPLETED: the gate let a name outside the policy through"})
	}
	after, err := health()
	if err != nil {
		return append(out, Check{"gate", what, false, err.Error()})
	}
	if after.Reasons[GateNotAllowed] <= h.Reasons[GateNotAllowed] {
		return append(out, Check{"gate", what, false, "failed (" + herr.Error() + ") but the gate did not refuse it: was it redirected?"})
	}
	return append(out, Check{"gate", what, true, "refused: " + herr.Error()})
}
