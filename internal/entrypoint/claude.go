package entrypoint

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
)

// ClaudeConfigEnv is the variable that tells Claude Code where it keeps
// its state (settings, login, MCP servers, history, trust decisions and,
// inside that directory, .claude.json). devbox init sets it in
// devcontainer.json's containerEnv to ~/.claude, the per-container volume,
// so the entrypoint sees it too.
const ClaudeConfigEnv = "CLAUDE_CONFIG_DIR"

// ClaudeStateFile is the file Claude Code writes inside its configuration
// directory when CLAUDE_CONFIG_DIR is set (else ~/.claude.json).
const ClaudeStateFile = ".claude.json"

// ClaudeConfigDir is the directory Claude Code keeps acct's state in: the
// value of CLAUDE_CONFIG_DIR (configured, "" when unset), else ~/.claude.
func ClaudeConfigDir(acct Account, configured string) string {
	if configured != "" {
		return configured
	}
	return filepath.Join(acct.Home, layout.ClaudeDir)
}

// checkClaudeDir accepts dir when it is a clean absolute path strictly
// inside acct's home: the entrypoint runs as root and hands what it finds
// there to the agent's user, so a CLAUDE_CONFIG_DIR pointing anywhere else
// (/etc, /, another account's home) is never touched.
func checkClaudeDir(acct Account, dir string) error {
	home := acct.Home
	if home == "" || home == "/" || !filepath.IsAbs(home) || filepath.Clean(home) != home {
		return fmt.Errorf("%s's home %q is not a directory of its own: Claude Code's state left alone", acct.Name, home)
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(dir, home+"/") {
		return fmt.Errorf("%s=%q is not a clean path inside %s's home %s: left alone", ClaudeConfigEnv, dir, acct.Name, home)
	}
	return nil
}
