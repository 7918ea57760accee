package gateway

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// What a request may be before any route sees it. Each rule is an
// allow-list: a request the gateway cannot read exactly as its upstream
// will is refused, never forwarded.

// Methods each route forwards; anything else is 405 and never leaves.
// TRACE would echo the injected credential back to the agent, CONNECT and
// OPTIONS are not requests any route's client makes.
var (
	// anthropicMethods: Claude Code POSTs /v1/messages (and
	// count_tokens); GET is for /v1/models and similar reads.
	anthropicMethods = []string{http.MethodGet, http.MethodPost}
	// httpMethods: what a REST API is called with.
	httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	// Git's smart HTTP is exactly three requests (see Gateway.git):
	// GET info/refs?service=…, POST git-upload-pack, POST git-receive-pack.
)

// protocolSwitch says why r asks to leave HTTP/1.1 ("" when it does not):
// an Upgrade (h2c, WebSocket) would hand the connection to the upstream
// raw after a 101, with the user's credential on it and the agent's bytes
// unchecked; HTTP/2 prior knowledge ("PRI * HTTP/2.0") likewise.
func protocolSwitch(r *http.Request) string {
	if r.ProtoMajor != 1 {
		return "only HTTP/1.x is served (HTTP/2 prior knowledge is refused)"
	}
	if len(r.Header.Values("Upgrade")) > 0 || len(r.Header.Values("Http2-Settings")) > 0 {
		return "protocol switches (Upgrade: h2c, websocket, …) are not forwarded"
	}
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return "protocol switches (Connection: upgrade) are not forwarded"
			}
		}
	}
	return ""
}

// canonicalQuery reads a raw query the one way it forwards it: pairs split
// on "&" only, names and values percent-decoded once ("+" is a space), and
// re-encoded, so the upstream reads exactly the names checked here. It
// refuses what servers split or decode differently (";", a bad escape) and
// any parameter that carries a credential (see credentialParam): the only
// identity on a protected host is the one the gateway injects.
func canonicalQuery(raw string) (string, string) {
	if raw == "" {
		return "", ""
	}
	if strings.Contains(raw, ";") {
		return "", "a query with \";\" is refused (servers split it differently)"
	}
	var out []string
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		rawName, rawValue, hasValue := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return "", "malformed query (bad percent escape)"
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return "", "malformed query (bad percent escape)"
		}
		if credentialParam(name) {
			return "", "query parameter " + quoteName(name) + " looks like a credential: the gateway injects the only identity used on this host"
		}
		enc := url.QueryEscape(name)
		if hasValue {
			enc += "=" + url.QueryEscape(value)
		}
		out = append(out, enc)
	}
	return strings.Join(out, "&"), ""
}

// credentialParams are query parameter names that carry credentials, in
// the form normalizeName gives them (API keys, OAuth and personal tokens,
// signed-URL signatures and security tokens of the big clouds).
var credentialParams = []string{
	"key", "apikey", "apitoken", "accesstoken", "accesskey", "token", "authtoken",
	"auth", "authorization", "bearer", "jwt", "password", "passwd", "secret",
	"clientsecret", "privatetoken", "jobtoken", "session", "sessionid",
	"sig", "signature", "credential", "credentials", "subscriptionkey",
	"xamzcredential", "xamzsignature", "xamzsecuritytoken", "xgoogcredential", "xgoogsignature",
}

// normalizeName folds the spellings servers treat alike: case, "-", "_",
// "." and spaces.
func normalizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch r {
		case '-', '_', '.', ' ':
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func credentialParam(name string) bool {
	return slices.Contains(credentialParams, normalizeName(name))
}

// quoteName is a client-given name for a message, bounded, and quoted
// with every control character escaped when it has any.
func quoteName(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == '"' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// Request headers forwarded per route (lower case). The anthropic and git
// routes forward only what their clients need (measured: Claude Code
// 2.1.332 against the fake API, git 2.39 through the gateway); any other
// header, and any spelling of one (X_Api_Key, x-api_key), is dropped.
var (
	anthropicHeaders = []string{
		"accept", "accept-encoding", "accept-language", "content-type", "user-agent",
		"anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access",
		"x-app", "x-claude-code-session-id",
	}
	// anthropicHeaderPrefixes: the SDK's x-stainless-* (arch, lang, os,
	// package-version, retry-count, runtime, runtime-version, timeout).
	anthropicHeaderPrefixes = []string{"x-stainless-"}
	gitHeaders              = []string{
		"accept", "accept-encoding", "accept-language", "content-type", "content-encoding",
		"user-agent", "git-protocol", "pragma", "cache-control",
	}
)

// credentialHeaderWords mark a header name (normalized) as carrying a
// credential on an http route, which forwards every other header: the
// APIs behind it are the user's and their headers are not known here.
var credentialHeaderWords = []string{"auth", "token", "secret", "passw", "apikey", "cookie", "session", "credential", "signature"}

func credentialHeader(name string) bool {
	n := normalizeName(name)
	for _, w := range credentialHeaderWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return n == "key" || strings.HasSuffix(n, "apikey") || strings.HasSuffix(n, "accesskey")
}

// keepAllowed returns a header filter that keeps the listed names and
// prefixes, compared in lower case: "X_Api_Key" is not "x-api-key".
func keepAllowed(names, prefixes []string) func(string) bool {
	return func(h string) bool {
		l := strings.ToLower(h)
		if slices.Contains(names, l) {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				return true
			}
		}
		return false
	}
}

// keepHTTP is the http route's filter: every header but the credential-like
// and any spelling of the route's own header.
func keepHTTP(injected string) func(string) bool {
	own := normalizeName(injected)
	return func(h string) bool {
		return !credentialHeader(h) && normalizeName(h) != own
	}
}
