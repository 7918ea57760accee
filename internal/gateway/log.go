package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
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

// logger writes Entries as JSON lines to w, one Write per line.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logger) log(e Entry) {
	if l == nil || l.w == nil {
		return
	}
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(append(b, '\n'))
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
