package gateway

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/devbox-dev/devbox/internal/atomicfile"
	"github.com/devbox-dev/devbox/internal/policy"
)

// Markers around devbox's part of the system gitconfig; the rest of the
// file is the image's and is kept as it is.
const (
	gitBegin = "# BEGIN devbox credential gateway (written on every container start; edits are lost)"
	gitEnd   = "# END devbox credential gateway"
)

// GitConfig is the system gitconfig block that sends each git host of
// creds through the gateway at addr: HTTPS, scp-style SSH and ssh:// URLs
// of the host all become http://ADDR/git/HOST/….
func GitConfig(creds policy.Credentials, addr string) string {
	if len(creds.Git) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(gitBegin + "\n")
	for _, g := range creds.Git {
		fmt.Fprintf(&b, "[url \"%s\"]\n", gitRoute(addr, g.Host))
		for _, from := range gitRewrites(g.Host) {
			fmt.Fprintf(&b, "\tinsteadOf = %s\n", from)
		}
	}
	b.WriteString(gitEnd + "\n")
	return b.String()
}

// GitConfigEnv is GitConfig as git's environment configuration
// (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n), for a container
// whose /etc/gitconfig the gateway cannot write: the agent's container of a
// Kubernetes pod, where the gateway runs in a container of its own.
func GitConfigEnv(creds policy.Credentials, addr string) [][2]string {
	var kv [][2]string
	for _, g := range creds.Git {
		for _, from := range gitRewrites(g.Host) {
			kv = append(kv, [2]string{"url." + gitRoute(addr, g.Host) + ".insteadOf", from})
		}
	}
	if len(kv) == 0 {
		return nil
	}
	env := [][2]string{{"GIT_CONFIG_COUNT", fmt.Sprint(len(kv))}}
	for i, e := range kv {
		env = append(env, [2]string{fmt.Sprintf("GIT_CONFIG_KEY_%d", i), e[0]}, [2]string{fmt.Sprintf("GIT_CONFIG_VALUE_%d", i), e[1]})
	}
	return env
}

// gitRoute is the gateway's URL prefix for a git host.
func gitRoute(addr, host string) string { return "http://" + addr + GitPrefix + host + "/" }

// gitRewrites are the URL forms of host that go through the gateway:
// HTTPS, scp-style SSH and ssh://.
func gitRewrites(host string) []string {
	return []string{"https://" + host + "/", "git@" + host + ":", "ssh://git@" + host + "/"}
}

// WriteGitConfig replaces devbox's block in the gitconfig at path with
// block (removing it when block is empty), keeping everything else.
func WriteGitConfig(path, block string) error {
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("gateway: %w", err)
	}
	rest := string(raw)
	if i := strings.Index(rest, gitBegin); i >= 0 {
		end := len(rest)
		if j := strings.Index(rest[i:], gitEnd); j >= 0 {
			end = i + j + len(gitEnd)
			if end < len(rest) && rest[end] == '\n' {
				end++
			}
		}
		rest = rest[:i] + rest[end:]
	}
	if rest != "" && !strings.HasSuffix(rest, "\n") {
		rest += "\n"
	}
	out := rest + block
	if out == string(raw) {
		return nil
	}
	if out == "" {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("gateway: %w", err)
		}
		return nil
	}
	return atomicfile.WriteFile(path, []byte(out), 0o644)
}
