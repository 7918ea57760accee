package devcontainer

import (
	"bytes"
	"os"
	"path/filepath"
)

// Preset is a network preset init puts in a new policy, with the reason it
// is there (written as a comment above it).
type Preset struct {
	Name string
	Why  string
}

// basePresets are in every policy init writes: the agent cannot work
// without its API, the login flow, or (under "Reopen in Container") the VS
// Code server and its extensions.
var basePresets = []Preset{
	{"anthropic", "Claude Code's API and what it needs to run."},
	{"claude-login", "the Claude login (OAuth) hosts."},
	{"vscode", "VS Code server downloads and extensions (Reopen in Container); remove it if you only use the CLI."},
}

// ecosystemMarkers maps files at the repository root to the preset their
// package manager needs. Only the root is looked at: a vendored package.json
// deep in the tree should not open the npm registry.
var ecosystemMarkers = []struct {
	files  []string
	preset Preset
}{
	{[]string{"package.json"}, Preset{"npm", "the npm registry (package.json found)."}},
	{[]string{"go.mod"}, Preset{"go", "the Go module proxy and checksum database (go.mod found)."}},
	{[]string{"pyproject.toml", "requirements.txt", "setup.py", "Pipfile"}, Preset{"pypi", "the Python package index (a Python project file found)."}},
}

// DetectPresets returns the presets a new policy for the repository at dir
// should start with: basePresets, one per ecosystem whose marker file is at
// the root, and github only when the repository has a GitHub remote (GitHub
// is also a place data can be pushed to, so it is not opened by default).
func DetectPresets(dir string) []Preset {
	out := append([]Preset(nil), basePresets...)
	for _, m := range ecosystemMarkers {
		for _, f := range m.files {
			if fi, err := os.Stat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
				out = append(out, m.preset)
				break
			}
		}
	}
	if cfg, err := os.ReadFile(filepath.Join(dir, ".git", "config")); err == nil && bytes.Contains(cfg, []byte("github.com")) {
		out = append(out, Preset{"github", "GitHub (the repository has a github.com remote)."})
	}
	return out
}
