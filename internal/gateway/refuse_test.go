package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawRequest writes req as is to the gateway at url and returns the status
// line and the whole response (or what came before the connection closed).
func rawRequest(t *testing.T, url, req string) (string, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	// One response, read by its framing: the connection may stay open.
	var raw strings.Builder
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(c, &raw)), nil)
	if err != nil {
		line, _, _ := strings.Cut(raw.String(), "\r\n")
		return line, raw.String()
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return fmt.Sprintf("HTTP/%d.%d %s", resp.ProtoMajor, resp.ProtoMinor, resp.Status), string(body)
}

// upstreamCount is every request the fixture's upstreams saw.
func (f *fixture) upstreamCount() int {
	n := len(f.api.Requests()) + len(f.http.Requests())
	if f.git != nil {
		n += len(f.git.Requests()) + len(f.push.Requests())
	}
	return n
}

// TestMethodsPerRoute (finding 5): each route forwards its own methods;
// TRACE (which an echoing upstream answers with the injected credential),
// CONNECT, OPTIONS and the rest get 405 or 400 and never leave.
func TestMethodsPerRoute(t *testing.T) {
	f := newFixture(t, nil)
	for _, c := range []struct{ line, want string }{
		{"TRACE /v1/messages HTTP/1.1", "405"},
		{"OPTIONS /v1/messages HTTP/1.1", "405"},
		{"DELETE /v1/files/x HTTP/1.1", "405"},
		{"TRACE /http/api.example.test/echo HTTP/1.1", "405"},
		{"OPTIONS /http/api.example.test/echo HTTP/1.1", "405"},
		{"PROPFIND /http/api.example.test/echo HTTP/1.1", "405"},
		{"CONNECT /http/api.example.test/echo HTTP/1.1", "405"},
		{"CONNECT api.example.test:443 HTTP/1.1", "400"},
		{"TRACE /git/git.test/acme/app.git/info/refs?service=git-upload-pack HTTP/1.1", "405"},
		{"GET /git/git.test/acme/app.git/git-upload-pack HTTP/1.1", "405"},
		{"POST /git/git.test/acme/app.git/info/refs?service=git-upload-pack HTTP/1.1", "405"},
		{"PUT /git/git.test/acme/app.git/git-receive-pack HTTP/1.1", "405"},
	} {
		status, resp := rawRequest(t, f.url, c.line+"\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		if !strings.Contains(status, " "+c.want+" ") {
			t.Errorf("%s: %q, want %s\n%s", c.line, status, c.want, resp)
		}
	}
	if n := f.upstreamCount(); n != 0 {
		t.Errorf("%d refused requests reached an upstream", n)
	}
	// What the routes are for still goes through.
	for _, m := range httpMethods {
		req, _ := http.NewRequest(m, f.url+"/http/api.example.test/items", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s on the http route: %v %v", m, resp.Status, err)
			continue
		}
		resp.Body.Close()
	}
	if n := len(f.http.Requests()); n != len(httpMethods) {
		t.Errorf("the http upstream saw %d requests, want %d", n, len(httpMethods))
	}
}

// TestNoProtocolSwitch (finding 6): Upgrade (h2c, WebSocket), Connection:
// upgrade and HTTP/2 prior knowledge are refused, and the server itself
// answers HTTP/1.1, never an HTTP/2 frame.
func TestNoProtocolSwitch(t *testing.T) {
	f := newFixture(t, nil)
	for _, h := range []string{
		"Upgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n",
		"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n",
		"Upgrade: websocket\r\n",
		"Connection: keep-alive, upgrade\r\n",
		"HTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n",
	} {
		for _, path := range []string{"/v1/messages", "/http/api.example.test/ws"} {
			status, resp := rawRequest(t, f.url, "GET "+path+" HTTP/1.1\r\nHost: x\r\n"+h+"\r\n")
			if !strings.HasPrefix(status, "HTTP/1.1 400 ") || !strings.Contains(resp, "not forwarded") {
				t.Errorf("%s with %q: %q\n%s", path, h, status, resp)
			}
		}
	}
	// Prior knowledge: the client preface, then a SETTINGS frame.
	status, resp := rawRequest(t, f.url, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	if !strings.HasPrefix(status, "HTTP/1.1 4") && !strings.HasPrefix(status, "HTTP/1.1 5") {
		t.Errorf("HTTP/2 prior knowledge: %q, want an HTTP/1.1 refusal\n%q", status, resp)
	}
	if n := f.upstreamCount(); n != 0 {
		t.Errorf("%d protocol switches reached an upstream", n)
	}
}

// TestGitQueryCanonical (finding 7): info/refs goes up only with the exact
// query git sends. git http-backend acts on the last of repeated
// parameters and decodes escaped names: a first service=git-upload-pack
// must not carry a receive-pack advertisement past a fetch-only route.
func TestGitQueryCanonical(t *testing.T) {
	requireGit(t)
	f := newFixture(t, nil, true)
	for _, q := range []string{
		"service=git-upload-pack&service=git-receive-pack",
		"service=git-upload-pack&%73ervice=git-receive-pack",
		"service=git-upload-pack&servic%65=git-receive-pack",
		"service=git%2Dreceive-pack",
		"service=git-upload-pack&",
		"&service=git-upload-pack",
		"service=git-upload-pack;service=git-receive-pack",
		"service=git-upload-pack&x=1",
		"Service=git-upload-pack",
		"service=git-upload-pack+",
		"",
	} {
		status, resp := rawRequest(t, f.url, "GET /git/git.test/acme/ro.git/info/refs?"+q+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(status, "HTTP/1.1 400 ") {
			t.Errorf("?%s: %q, want 400\n%s", q, status, resp)
		}
	}
	for _, p := range []string{"git-upload-pack?x=1", "git-receive-pack?service=git-upload-pack", "git-upload-pack?"} {
		status, resp := rawRequest(t, f.url, "POST /git/push.test/acme/app.git/"+p+" HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		if !strings.HasPrefix(status, "HTTP/1.1 400 ") {
			t.Errorf("POST %s: %q, want 400\n%s", p, status, resp)
		}
	}
	if n := f.upstreamCount(); n != 0 {
		t.Errorf("%d refused git requests reached the upstream", n)
	}
	// The two forms git sends pass; the fetch-only route still refuses
	// the receive-pack one (403, by policy).
	for q, want := range map[string]string{gitQueryUploadPack: "200", gitQueryReceivePack: "403"} {
		status, _ := rawRequest(t, f.url, "GET /git/git.test/acme/ro.git/info/refs?"+q+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.Contains(status, " "+want+" ") {
			t.Errorf("?%s: %q, want %s", q, status, want)
		}
	}
}

// TestCredentialParamsAndHeaders (finding 9): a query parameter named like
// a credential is refused, in any case, separator or escape; header names
// that a server could fold into a credential header never go up; the
// anthropic and git routes forward their clients' headers only.
func TestCredentialParamsAndHeaders(t *testing.T) {
	f := newFixture(t, nil)
	for _, q := range []string{"api_key=x", "API-KEY=x", "apiKey=x", "access%5Ftoken=x", "Token=x", "key=x", "a=1&private_token=x", "x-amz-signature=x", "auth=x"} {
		for _, path := range []string{"/http/api.example.test/items", "/v1/messages"} {
			resp, body := post(t, f.url+path+"?"+q, nil)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "looks like a credential") {
				t.Errorf("%s?%s: %d %s", path, q, resp.StatusCode, body)
			}
		}
	}
	if n := f.upstreamCount(); n != 0 {
		t.Errorf("%d requests with a credential in the query reached an upstream", n)
	}
	// An ordinary query goes up in canonical form.
	resp, _ := post(t, f.url+"/http/api.example.test/items?page=2&q=a+b&sort=%2Dname", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("ordinary query: %s", resp.Status)
	}
	if r := f.http.Requests()[0]; r.Query != "page=2&q=a+b&sort=-name" {
		t.Errorf("upstream query %q", r.Query)
	}

	variants := map[string]string{
		"X_Api_Key": "attacker", "x-api_key": "attacker", "X-Api-Key": "attacker", "Authorization_": "Bearer attacker",
		"X-Auth-Token": "attacker", "Private_Token": "attacker", "Cookie": "s=attacker", "Proxy-Authorization": "Basic attacker",
		"X-Session-Id": "attacker", "Api_Key": "attacker",
	}
	var hdr strings.Builder
	for k, v := range variants {
		fmt.Fprintf(&hdr, "%s: %s\r\n", k, v)
	}
	hdr.WriteString("X-Stainless-Os: Linux\r\nAnthropic-Version: 2023-06-01\r\nX-Other: kept-on-http-only\r\nIdempotency-Key: k1\r\n")
	for _, path := range []string{"/v1/messages", "/http/api.example.test/h"} {
		body := `{"model":"m","messages":[]}`
		status, resp := rawRequest(t, f.url, fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, hdr.String(), len(body), body))
		if !strings.Contains(status, " 200 ") {
			t.Fatalf("%s: %q\n%s", path, status, resp)
		}
	}
	check := func(route string, h http.Header, keep, drop []string) {
		for k, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "attacker") {
					t.Errorf("%s: upstream saw %s: %s", route, k, v)
				}
			}
		}
		for _, k := range keep {
			if h.Get(k) == "" {
				t.Errorf("%s: upstream lacks %s", route, k)
			}
		}
		for _, k := range drop {
			if _, ok := h[k]; ok {
				t.Errorf("%s: upstream saw %s", route, k)
			}
		}
	}
	a := f.api.Requests()[0].Headers
	check("anthropic", a, []string{"X-Stainless-Os", "Anthropic-Version", "X-Api-Key"}, []string{"X-Other", "Idempotency-Key", "X_Api_Key", "Authorization"})
	if a.Get("X-Api-Key") != apiKey || len(a.Values("X-Api-Key")) != 1 {
		t.Errorf("anthropic: x-api-key %q", a.Values("X-Api-Key"))
	}
	hr := f.http.Requests()[1].Headers
	check("http", hr, []string{"X-Other", "Idempotency-Key", "X-Stainless-Os"}, []string{"X_Api_Key", "X-Api-Key", "Cookie", "Authorization_"})
	if hr.Get("Authorization") != "Bearer "+httpToken || len(hr.Values("Authorization")) != 1 {
		t.Errorf("http: authorization %q", hr.Values("Authorization"))
	}
	// A header name with a space before the colon never reaches a route.
	n := f.upstreamCount()
	status, _ := rawRequest(t, f.url, "GET /http/api.example.test/x HTTP/1.1\r\nHost: x\r\nAuthorization : Bearer attacker\r\nConnection: close\r\n\r\n")
	if !strings.Contains(status, " 400 ") || f.upstreamCount() != n {
		t.Errorf("\"Authorization :\": %q, %d upstream requests", status, f.upstreamCount()-n)
	}
}

// TestLogIsEscapedJSON (finding 8): a path with escaped CR, LF and ESC is
// logged as sent (escaped), on one JSON line; nothing forged, no raw
// control byte in the file.
func TestLogIsEscapedJSON(t *testing.T) {
	f := newFixture(t, nil)
	forged := `{"time":"x","event":"forwarded","route":"anthropic"}`
	paths := []string{
		"/v1/messages%0D%0A" + strings.ReplaceAll(forged, `"`, "%22") + "%1B[31m",
		"/v1/%0A%1B]0;owned%07",
		"/http/api.example.test/%0d%0aforged",
		"/git/git.test/acme/app.git/info/refs%0A",
	}
	for _, p := range paths {
		status, _ := rawRequest(t, f.url, "GET "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		if !strings.Contains(status, " 400 ") {
			t.Errorf("%s: %q, want 400", p, status)
		}
	}
	post(t, f.url+"/v1/messages", nil)
	if n := f.upstreamCount(); n != 1 {
		t.Errorf("%d upstream requests, want the one ordinary request", n)
	}
	log := f.logs.String()
	if strings.ContainsAny(log, "\r\x1b\x07") {
		t.Errorf("log has a raw control byte: %q", log)
	}
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	if len(lines) != len(paths)+1 {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(paths)+1, log)
	}
	for i, l := range lines {
		var e Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, l)
		}
		if i < len(paths) && (e.Event != "refused" || e.Path != paths[i] || e.Status != 400) {
			t.Errorf("line %d: %+v, want refused with path %q", i, e, paths[i])
		}
		if i == len(paths) && (e.Event != "forwarded" || e.Fingerprint == "" || e.Secret != "anthropic") {
			t.Errorf("forwarded line: %+v", e)
		}
	}
}
