//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/escape"
)

// escapeConfigOf parses args as `devbox escape` would and returns the
// config, without running the scorecard.
func escapeConfigOf(t *testing.T, args ...string) (escape.Config, error) {
	t.Helper()
	var cfg escape.Config
	var err error
	app := &cli.App{Commands: []*cli.Command{{
		Name: "escape", Flags: escapeCommand.Flags,
		Action: func(c *cli.Context) error { cfg, err = escapeConfig(c); return nil },
	}}}
	if rerr := app.Run(append([]string{"devbox", "escape"}, args...)); rerr != nil {
		t.Fatal(rerr)
	}
	return cfg, err
}

func TestEscapeConfig(t *testing.T) {
	if c, err := escapeConfigOf(t, "--workspace", "/ws"); err != nil || c.World != nil || c.Workspace != "/ws" {
		t.Errorf("no world: %+v, %v", c, err)
	}
	c, err := escapeConfigOf(t, "--addr", "10.0.0.3:80", "--addr", "10.0.0.4:80", "--tunnel-domain", "exfil.test", "--secret", "M")
	if err != nil || c.World == nil || len(c.World.Addrs) != 2 || c.World.TunnelDomain != "exfil.test" || c.Secret != "M" {
		t.Errorf("flags: %+v, %v", c, err)
	}
	p := filepath.Join(t.TempDir(), "w.jsonc")
	os.WriteFile(p, []byte("// the world\n{\"world\": {\"names\": [\"denied.test:80\"]}, \"workspace\": \"/a\",}\n"), 0o644)
	c, err = escapeConfigOf(t, "--world", p, "--workspace", "/b", "--addr", "10.0.0.3:80")
	if err != nil || c.Workspace != "/b" || len(c.World.Names) != 1 || len(c.World.Addrs) != 1 {
		t.Errorf("file and flags: %+v, %v", c, err)
	}
	os.WriteFile(p, []byte(`{"world": {}}`), 0o644)
	if _, err := escapeConfigOf(t, "--world", p); err == nil || !strings.Contains(err.Error(), "names no destination") {
		t.Errorf("empty world: %v", err)
	}
}
