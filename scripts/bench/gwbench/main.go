// Command gwbench measures what the credential gateway adds to a request:
// per-request latency (p50, p99) and the delay to the first byte of a
// server-sent-events stream, through the gateway vs straight to the
// upstream. Everything is on loopback: a fake Messages API over TLS (test
// CA), and the gateway in this process with the production handler. It
// prints figures and asserts nothing.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/testworld"
)

type secrets map[string]string

func (s secrets) Secret(name string) ([]byte, error) { return []byte(s[name]), nil }

const key = "sk-ant-api03-bench"

func main() {
	n := flag.Int("n", 2000, "requests per path")
	delay := flag.Duration("event-delay", 20*time.Millisecond, "delay between SSE events (first-byte run)")
	flag.Parse()

	ca, err := testworld.NewCA()
	if err != nil {
		log.Fatal(err)
	}
	cert, err := ca.Certificate("api.anthropic.test")
	if err != nil {
		log.Fatal(err)
	}
	api := &testworld.MessagesAPI{Key: key, Reply: "hi"}
	up := httptest.NewUnstartedServer(api)
	up.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	up.StartTLS()
	defer up.Close()
	slow := &testworld.MessagesAPI{Key: key, Reply: "hi", EventDelay: *delay}
	slowUp := httptest.NewUnstartedServer(slow)
	slowUp.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	slowUp.StartTLS()
	defer slowUp.Close()

	// One transport shape for both paths: TLS to the upstream, verified
	// against the test CA, kept alive.
	transport := func(addr string) *http.Transport {
		t := gateway.DefaultTransport()
		t.TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), ServerName: "api.anthropic.test"}
		t.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}
		return t
	}
	creds := policy.Credentials{Anthropic: &policy.AnthropicCredential{Secret: "anthropic", Host: "api.anthropic.test"}}
	gw := httptest.NewServer(gateway.New(creds, secrets{"anthropic": key}, gateway.WithTransport(transport(up.Listener.Addr().String()))))
	defer gw.Close()
	slowGW := httptest.NewServer(gateway.New(creds, secrets{"anthropic": key}, gateway.WithTransport(transport(slowUp.Listener.Addr().String()))))
	defer slowGW.Close()

	direct := &http.Client{Transport: transport(up.Listener.Addr().String())}
	slowDirect := &http.Client{Transport: transport(slowUp.Listener.Addr().String())}
	viaGW := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4}}

	body := `{"model":"m","stream":true,"messages":[]}`
	incomplete := 0
	do := func(c *http.Client, url string, hdr bool) (total, first time.Duration) {
		req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(body))
		if hdr {
			req.Header.Set("X-Api-Key", key)
		}
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			log.Fatal(err)
		}
		first = time.Since(t0)
		rest, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.Contains(string(rest), "message_stop") {
			incomplete++
			if incomplete <= 3 {
				fmt.Fprintf(os.Stderr, "incomplete via %s: %v (%d bytes)\n", url, err, len(rest))
			}
		}
		if resp.StatusCode != 200 {
			log.Fatalf("status %s", resp.Status)
		}
		return time.Since(t0), first
	}
	measure := func(c *http.Client, url string, hdr bool, runs int) (tot, first []time.Duration) {
		for i := 0; i < 50; i++ { // warm connections
			do(c, url, hdr)
		}
		for i := 0; i < runs; i++ {
			a, b := do(c, url, hdr)
			tot, first = append(tot, a), append(first, b)
		}
		return
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(float64(len(s)-1)*p)]
	}
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

	dTot, _ := measure(direct, "https://api.anthropic.test", true, *n)
	gTot, _ := measure(viaGW, gw.URL, false, *n)
	fmt.Fprintf(os.Stdout, "whole streamed request (6 SSE events), %d sequential requests, keep-alive, loopback:\n", *n)
	fmt.Printf("  direct (TLS to upstream):      p50 %s  p99 %s\n", us(pct(dTot, .5)), us(pct(dTot, .99)))
	fmt.Printf("  through the gateway:           p50 %s  p99 %s\n", us(pct(gTot, .5)), us(pct(gTot, .99)))
	fmt.Printf("  added by the gateway:          p50 %s  p99 %s\n", us(pct(gTot, .5)-pct(dTot, .5)), us(pct(gTot, .99)-pct(dTot, .99)))

	runs := 100
	_, dFirst := measure(slowDirect, "https://api.anthropic.test", true, runs)
	sTot, gFirst := measure(&http.Client{Transport: &http.Transport{Proxy: nil}}, slowGW.URL, false, runs)
	fmt.Printf("first SSE byte, upstream waits %v between events (stream lasts ≥ %v), %d requests:\n", *delay, 5**delay, runs)
	fmt.Printf("  direct:                        p50 %s  p99 %s\n", us(pct(dFirst, .5)), us(pct(dFirst, .99)))
	fmt.Printf("  through the gateway:           p50 %s  p99 %s  (whole stream p50 %s)\n", us(pct(gFirst, .5)), us(pct(gFirst, .99)), us(pct(sTot, .5)))
	fmt.Printf("incomplete streams (no message_stop, or a read error): %d\n", incomplete)
}
