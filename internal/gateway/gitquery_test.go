package gateway

import (
	"bufio"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/testworld"
)

// backendService runs git http-backend as a CGI program for GET
// /acme/ro.git/info/refs?query, as testworld.GitServer does behind net/http,
// and says which service it acted on: "git-upload-pack",
// "git-receive-pack", "dumb" (the plain refs file) or "refused".
func backendService(t *testing.T, git, root, query string) string {
	t.Helper()
	cmd := exec.Command(git, "http-backend")
	cmd.Env = []string{
		"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=devbox", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + root,
		"REQUEST_METHOD=GET", "PATH_INFO=/acme/ro.git/info/refs", "QUERY_STRING=" + query, "GATEWAY_INTERFACE=CGI/1.1",
		"PATH=" + os.Getenv("PATH"),
	}
	out, _ := cmd.Output()
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch {
		case strings.EqualFold(k, "Status") && !strings.HasPrefix(v, "200"):
			return "refused"
		case strings.EqualFold(k, "Content-Type"):
			switch v {
			case "application/x-git-upload-pack-advertisement":
				return "git-upload-pack"
			case "application/x-git-receive-pack-advertisement":
				return "git-receive-pack"
			case "text/plain", "text/plain; charset=utf-8":
				return "dumb"
			}
			return "other:" + v
		}
	}
	return "refused"
}

// gitQueries generates info/refs query strings from the pieces servers
// read differently: repeated, escaped, case-changed and "+"-spelled
// names and values, ";" and empty pairs, NUL bytes.
func gitQueries(n int) []string {
	names := []string{"service", "service", "Service", "SERVICE", "%73ervice", "servic%65", "%73%65rvice", "service%00x", "service+", "+service", "ser%2Bvice", "service%20", "service[]", "x", ""}
	values := []string{"git-upload-pack", "git-receive-pack", "git-receive-pack", "git%2Dreceive-pack", "%67it-receive-pack", "git-receive-pack%00", "git-upload-pack+", "git-receive-pack+", "git-Receive-pack", "", "git-upload-pack;service=git-receive-pack", "git-upload-pack%26service%3Dgit-receive-pack", "git-upload-pack%0A"}
	seps := []string{"&", "&", "&", "&&", ";", "&amp;"}
	r := rand.New(rand.NewPCG(22, 7))
	seen := map[string]bool{gitQueryUploadPack: true, gitQueryReceivePack: true}
	out := []string{gitQueryUploadPack, gitQueryReceivePack}
	for tries := 0; len(out) < n && tries < 50*n; tries++ {
		var b strings.Builder
		pairs := 1 + r.IntN(3)
		for i := 0; i < pairs; i++ {
			if i > 0 {
				b.WriteString(seps[r.IntN(len(seps))])
			}
			b.WriteString(names[r.IntN(len(names))])
			if r.IntN(8) > 0 {
				b.WriteString("=" + values[r.IntN(len(values))])
			}
		}
		if r.IntN(10) == 0 {
			b.WriteString("&")
		}
		q := b.String()
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	return out
}

// TestGitQueryDifferential drives the gateway's reading of an info/refs
// query (GitService) and git http-backend's with the same bytes: whenever
// the gateway would forward, the backend must act on the very service the
// gateway checked against the route's policy. The figures compare the
// rule before this test (url.Values.Get, the first "service").
func TestGitQueryDifferential(t *testing.T) {
	git := requireGit(t)
	srv, err := testworld.NewGitServer(t.TempDir(), "token", "acme/ro")
	if err != nil {
		t.Fatal(err)
	}
	queries := gitQueries(400)
	var forwarded, oldDisagree int
	readings := map[string]int{}
	for _, q := range queries {
		backend := backendService(t, git, srv.Root, q)
		readings[backend]++
		gw := GitService(q)
		if gw != "" {
			forwarded++
			if gw != backend {
				t.Errorf("query %q: the gateway reads %q, git http-backend acts on %q", q, gw, backend)
			}
		}
		// The old rule: the first service= by net/url.
		vals, _ := url.ParseQuery(q)
		if old := vals.Get("service"); (old == "git-upload-pack" || old == "git-receive-pack") && old != backend {
			oldDisagree++
		}
	}
	if forwarded != 2 {
		t.Errorf("%d queries forwarded, want exactly git's two", forwarded)
	}
	if readings["git-upload-pack"] < 2 || readings["git-receive-pack"] < 2 {
		t.Errorf("the generator reached too few of http-backend's services: %v", readings)
	}
	t.Logf("%d queries: gateway forwards %d, 0 disagreements with git http-backend; http-backend's readings %v; the first-service rule (net/url) would have forwarded %d whose service http-backend read differently", len(queries), forwarded, readings, oldDisagree)
}
