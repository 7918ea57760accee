package testworld

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// APIRequest is what a fake upstream saw of one request: the credential
// headers and the path.
type APIRequest struct {
	Method, Path  string
	Query         string // the raw query
	APIKey        string // x-api-key
	Authorization string
	Beta          string // anthropic-beta
	Headers       http.Header
}

// Recording is a thread-safe list of requests a fake upstream received.
type Recording struct {
	mu   sync.Mutex
	reqs []APIRequest
}

// Add records r.
func (rec *Recording) Add(r *http.Request) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.reqs = append(rec.reqs, APIRequest{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		APIKey: r.Header.Get("X-Api-Key"), Authorization: r.Header.Get("Authorization"),
		Beta: r.Header.Get("Anthropic-Beta"), Headers: r.Header.Clone(),
	})
}

// Requests returns a copy of every request so far.
func (rec *Recording) Requests() []APIRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]APIRequest(nil), rec.reqs...)
}

// MessagesAPI is a fake Anthropic Messages API: POST /v1/messages answers
// with a fixed text reply, streamed as server-sent events when the request
// asks for a stream (Claude Code always does). Key is the only credential
// it accepts, as x-api-key or as a bearer token; anything else gets a 401
// like the real API's.
type MessagesAPI struct {
	Key   string
	Reply string
	// EventDelay is slept between SSE events (to measure streaming).
	EventDelay time.Duration
	// Hold, when not nil, is waited on after the first event is flushed:
	// a test proves streaming by reading that event while the rest is held.
	Hold <-chan struct{}
	Recording
}

func (m *MessagesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.Add(r)
	if r.Header.Get("X-Api-Key") != m.Key && r.Header.Get("Authorization") != "Bearer "+m.Key {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	// Read the whole body: a server that answers with part of the request
	// unread closes the connection after the answer.
	raw, _ := io.ReadAll(r.Body)
	json.Unmarshal(raw, &req)
	text, _ := json.Marshal(m.Reply)
	msgStart := fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_devbox","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`, req.Model)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_devbox","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`, req.Model, text)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	events := [][2]string{
		{"message_start", msgStart},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%s}}`, text)},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`},
		{"message_stop", `{"type":"message_stop"}`},
	}
	fl, _ := w.(http.Flusher)
	for i, e := range events {
		if i > 0 && m.EventDelay > 0 {
			time.Sleep(m.EventDelay)
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", e[0], e[1])
		if fl != nil {
			fl.Flush()
		}
		if i == 0 && m.Hold != nil {
			<-m.Hold
		}
	}
}

// GitServer serves bare repositories under Root over git's smart HTTP
// protocol (git http-backend behind net/http/cgi), pushes included, to
// clients that give Token as the basic-auth password.
type GitServer struct {
	Root  string
	Token string
	Recording
}

// NewGitServer makes a bare repository for each path ("acme/app") under a
// new directory, each with one commit on main.
func NewGitServer(dir, token string, repos ...string) (*GitServer, error) {
	s := &GitServer{Root: filepath.Join(dir, "repos"), Token: token}
	work := filepath.Join(dir, "seed")
	git := func(d string, args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x.test", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x.test")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	if err := git(work, "init", "-q", "-b", "main"); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("seed\n"), 0o644); err != nil {
		return nil, err
	}
	if err := git(work, "add", "README"); err != nil {
		return nil, err
	}
	if err := git(work, "commit", "-q", "-m", "seed"); err != nil {
		return nil, err
	}
	for _, r := range repos {
		bare := filepath.Join(s.Root, r+".git")
		if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
			return nil, err
		}
		if err := git(dir, "clone", "-q", "--bare", work, bare); err != nil {
			return nil, err
		}
		if err := git(bare, "config", "http.receivepack", "true"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *GitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.Add(r)
	if _, pw, ok := r.BasicAuth(); !ok || pw != s.Token {
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "bad credentials", http.StatusUnauthorized)
		return
	}
	h := &cgi.Handler{
		Path: "git",
		Args: []string{"http-backend"},
		Env:  []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=devbox", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + s.Root},
	}
	if p, err := exec.LookPath("git"); err == nil {
		h.Path = p
	}
	h.ServeHTTP(w, r)
}

// Log returns the bare repository's `git log --oneline` of branch.
func (s *GitServer) Log(repo, branch string) (string, error) {
	out, err := exec.Command("git", "--git-dir", filepath.Join(s.Root, repo+".git"), "log", "--format=%s", branch).CombinedOutput()
	return string(out), err
}
