//go:build linux

package escape

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
)

// Sandboxes that leave no route out but an HTTP proxy (srt, Docker's
// sandboxes) decide by the name in CONNECT. The proxy attempts ask the
// sandbox's own proxy, from the environment it gives its programs, for
// world destinations and for the allowed name with another SNI or Host
// inside the tunnel. Without a proxy in the environment they are not
// applicable.

// sandboxProxy returns the HTTP proxy the environment names, or nil.
func sandboxProxy() *url.URL {
	for _, k := range []string{"HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY", "http_proxy"} {
		if u, err := url.Parse(os.Getenv(k)); err == nil && u.Scheme == "http" && u.Host != "" {
			return u
		}
	}
	return nil
}

// dialProxy opens a CONNECT tunnel to hostport through the sandbox's
// proxy. A refusal is returned as an error (the attempt is blocked); no
// proxy makes the attempt not applicable.
func dialProxy(ctx context.Context, hostport string) (net.Conn, error) {
	p := sandboxProxy()
	if p == nil {
		return nil, invalid("no HTTP proxy in the environment")
	}
	c, err := dial(ctx, "tcp", p.Host)
	if err != nil {
		return nil, invalid("the proxy %s does not answer: %v", p.Host, err)
	}
	req := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n", hostport, hostport)
	if p.User != nil {
		pw, _ := p.User.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(p.User.Username()+":"+pw)) + "\r\n"
	}
	if _, err := fmt.Fprint(c, req+"\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	// Read the answer a byte at a time: nothing past the blank line may be
	// taken from the tunnel.
	var head strings.Builder
	b := make([]byte, 1)
	for !strings.HasSuffix(head.String(), "\r\n\r\n") && head.Len() < 8192 {
		if _, err := io.ReadFull(c, b); err != nil {
			c.Close()
			return nil, fmt.Errorf("proxy: %v after %q", err, head.String())
		}
		head.WriteByte(b[0])
	}
	status, _, _ := strings.Cut(head.String(), "\r\n")
	if f := strings.Fields(status); len(f) < 2 || f[1] != "200" {
		c.Close()
		return nil, fmt.Errorf("proxy refused CONNECT %s: %s", hostport, status)
	}
	return c, nil
}

// reachWorldVia asks the world at hostport through the sandbox's proxy.
func reachWorldVia(ctx context.Context, hostport, nonce string) error {
	c, err := dialProxy(ctx, hostport)
	if err != nil {
		return err
	}
	defer c.Close()
	answer, got, rerr := askWorld(c, hostport, nonce)
	if answer != "" {
		return escaped("through the proxy, the world answered %q", answer)
	}
	return fmt.Errorf("tunnel to %s opened but no answer from the world (%q, %v)", hostport, got, rerr)
}

// frontVia opens a tunnel to the allowed hostport through the proxy and
// asks, inside it, for another site: in the TLS SNI (host false) or the
// HTTP Host (host true). A proxy that refuses the allowed name proves
// nothing: not applicable.
func frontVia(ctx context.Context, hostport, other string, host bool) error {
	c, err := dialProxy(ctx, hostport)
	if err != nil {
		if _, ok := err.(*InvalidError); ok {
			return err
		}
		return invalid("the proxy does not open the allowed name, so the attempt proves nothing: %v", err)
	}
	if host {
		return hostOver(c, other)
	}
	return sniOver(ctx, c, other)
}

func proxyAttempts(w *World, nonce, other string) []Attempt {
	var as []Attempt
	add := func(cat, name, target string, run func(context.Context) error) {
		as = append(as, Attempt{Category: cat, Check: Check{Name: name, Target: target, Kind: MustFail, Run: run}})
	}
	for _, a := range w.Addrs {
		add("egress-addr", "CONNECT through the sandbox's proxy", a, func(ctx context.Context) error { return reachWorldVia(ctx, a, nonce) })
	}
	for _, hp := range w.Names {
		add("egress-name", "CONNECT through the sandbox's proxy", hp, func(ctx context.Context) error { return reachWorldVia(ctx, hp, nonce) })
	}
	if w.Metadata != "" {
		add("metadata", "CONNECT through the sandbox's proxy", w.Metadata, func(ctx context.Context) error { return reachWorldVia(ctx, w.Metadata, nonce) })
	}
	for _, hp := range w.Allowed {
		add("fronting", "proxy tunnel to the allowed name, other SNI", hp+" sni="+other, func(ctx context.Context) error { return frontVia(ctx, hp, other, false) })
		add("fronting", "proxy tunnel to the allowed name, other Host", hp+" host="+other, func(ctx context.Context) error { return frontVia(ctx, hp, other, true) })
	}
	return as
}
