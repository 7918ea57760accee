package firewall

import (
	"context"
	"fmt"
	"net"
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
	Kind   string `json:"kind"` // "allowed", "denied", "refused", "daemon"
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
	if err != nil {
		checks = append(checks, Check{"daemon", "dns filter", false, err.Error()})
	} else {
		checks = append(checks, Check{"daemon", "dns filter", true, fmt.Sprintf("pid %d answers, upstreams %s", h.PID, strings.Join(h.Upstreams, ","))})
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
