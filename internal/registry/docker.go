package registry

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// DefaultDockerHost is the Docker engine address when $DOCKER_HOST is unset.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// DockerHost returns $DOCKER_HOST or DefaultDockerHost.
func DockerHost() string { return envOr("DOCKER_HOST", DefaultDockerHost) }

// envOr returns $name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// LoadDocker streams an image tarball in the `docker save` format (BuildKit's
// docker exporter output) into the Docker engine at host (unix:// or
// tcp://, no TLS) through its /images/load API, as `docker load` does, and
// returns what the engine printed ("Loaded image: …").
func LoadDocker(ctx context.Context, host string, tarball io.Reader) (string, error) {
	u, err := url.Parse(host)
	if err != nil {
		return "", fmt.Errorf("DOCKER_HOST %q: %w", host, err)
	}
	tr := &http.Transport{}
	base := "http://docker"
	switch u.Scheme {
	case "unix":
		sock := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}
	case "tcp", "http":
		base = "http://" + u.Host
	default:
		return "", fmt.Errorf("DOCKER_HOST %q: only unix:// and tcp:// (without TLS) are supported for --load", host)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/images/load?quiet=1", tarball)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("Docker engine at %s: %w (is dockerd running? set DOCKER_HOST)", host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return "", fmt.Errorf("Docker engine at %s refused the image: %s: %s", host, resp.Status, strings.TrimSpace(string(b)))
	}
	// The body is a JSON message stream; an error arrives as a message,
	// with status 200.
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		if m.Error != "" {
			return "", fmt.Errorf("Docker engine at %s: loading the image: %s", host, m.Error)
		}
		if s := strings.TrimSpace(m.Stream); s != "" {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("Docker engine at %s: %w", host, err)
	}
	return strings.Join(out, "\n"), nil
}
