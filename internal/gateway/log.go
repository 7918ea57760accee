package gateway

import (
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/jsonl"
)

// Entry is one line of the gateway's log, written as JSON (encoding/json
// escapes every control character, so a client-chosen path or method can
// neither forge a line nor reach a terminal raw). Values are never logged:
// only the secret's name and fingerprint.
type Entry struct {
	Time string `json:"time"`
	// Event is "listening", "forwarded", "refused" or "upstream-error".
	Event  string `json:"event"`
	Route  string `json:"route,omitempty"` // "anthropic", "git", "http"
	Method string `json:"method,omitempty"`
	Host   string `json:"host,omitempty"`
	// Path is the request's path as the client sent it, still
	// percent-escaped (never decoded), at most maxLogPath bytes; the query
	// is left out (it may carry the client's own credential).
	Path        string   `json:"path,omitempty"`
	Status      int      `json:"status,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Secret      string   `json:"secret,omitempty"`
	Fingerprint string   `json:"fingerprint,omitempty"`
	Addr        string   `json:"addr,omitempty"`
	Hosts       []string `json:"hosts,omitempty"`
}

// maxLogPath bounds a logged path: a line stays readable and small.
const maxLogPath = 1024

// logger writes Entries as JSON lines, stamped with the time.
type logger struct{ jsonl.Log[Entry] }

func (l *logger) log(e Entry) {
	if l == nil {
		return
	}
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	l.Append(e)
}

// rawPath is r's path as sent: the request target up to the query, still
// escaped, bounded.
func rawPath(r *http.Request) string {
	p := r.RequestURI
	if p == "" {
		p = r.URL.EscapedPath()
	}
	p, _, _ = strings.Cut(p, "?")
	if len(p) > maxLogPath {
		p = p[:maxLogPath] + "…"
	}
	return p
}

// errorWriter turns the lines net/http and httputil log by themselves
// (a body copy cut short, a malformed connection) into Entries, so the
// log stays JSON lines whatever writes to it.
type errorWriter struct{ l *logger }

func (e errorWriter) Write(p []byte) (int, error) {
	e.l.log(Entry{Event: "server-error", Reason: strings.TrimRight(string(p), "\n")})
	return len(p), nil
}

// errorLog is a log.Logger for http.Server and httputil.ReverseProxy.
func (l *logger) errorLog() *log.Logger {
	return log.New(errorWriter{l}, "", 0)
}
