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
		fmt.Fprintf(&b, "[url \"http://%s%s%s/\"]\n", addr, GitPrefix, g.Host)
		for _, from := range []string{"https://" + g.Host + "/", "git@" + g.Host + ":", "ssh://git@" + g.Host + "/"} {
			fmt.Fprintf(&b, "\tinsteadOf = %s\n", from)
		}
	}
	b.WriteString(gitEnd + "\n")
	return b.String()
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
