package devcontainer

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/devbox-dev/devbox/internal/policy"
)

// Preset is a network preset init puts in a new policy, with the reason it
// is there (written as a comment above it).
type Preset struct {
	Name string
	Why  string
}

// basePresets are in every policy init writes: the agent cannot work
// without its API, the sign-in flow, or (under "Reopen in Container") the
// VS Code server and its extensions. The policy's credentials.anthropic
// sends Claude Code's requests through the gateway; the sign-in hosts are
// still needed where a token is made in the container: `devbox login
// --setup-token` runs `claude setup-token` there (as root, never the
// agent), and agent.login "in-container" runs /login.
var basePresets = []Preset{
	{"anthropic", "Claude Code's API and what it needs to run."},
	{"claude-login", "the Claude sign-in (OAuth) hosts: `devbox login --setup-token` makes its token through them; remove it if you paste an API key or token instead."},
	{"vscode", "VS Code server downloads and extensions (Reopen in Container); remove it if you only use the CLI."},
}

// Official Debian-based images init picks as the base of a new policy, one
// per ecosystem. Tags name a release line and `devbox lock` pins the digest.
const (
	// NodeBase is the Node.js LTS line on Debian stable, slim.
	NodeBase = "docker.io/library/node:24-trixie-slim"
	// PythonBase is the current Python on Debian stable, slim.
	PythonBase = "docker.io/library/python:3.13-slim-trixie"
	// GoBase is the current Go on Debian stable (the Go images have no slim
	// variant: the toolchain needs gcc for cgo).
	GoBase = "docker.io/library/golang:1.25-trixie"
)

// Base is the base image init puts in a new policy, with the reason (written
// as a comment above it).
type Base struct {
	Ref string
	Why string
}

// ecosystemMarkers maps files at the repository root to the preset their
// package manager needs and the base image with their toolchain, in the
// order the base is chosen when several are there. Only the root is looked
// at: a vendored package.json deep in the tree should not open the npm
// registry.
var ecosystemMarkers = []struct {
	files  []string
	preset Preset
	base   string
	what   string
}{
	{[]string{"package.json"}, Preset{"npm", "the npm registry (package.json found)."}, NodeBase, "the official Node.js LTS image (Debian slim), with node and npm"},
	{[]string{"pyproject.toml", "requirements.txt", "setup.py", "Pipfile"}, Preset{"pypi", "the Python package index (a Python project file found)."}, PythonBase, "the official Python image (Debian slim), with python3 and pip"},
	{[]string{"go.mod"}, Preset{"go", "the Go module proxy and checksum database (go.mod found)."}, GoBase, "the official Go image (Debian), with the go toolchain"},
}

// marker returns the first of files that is a regular file at dir's root.
func marker(dir string, files []string) string {
	for _, f := range files {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
			return f
		}
	}
	return ""
}

// DetectBase returns the base image a new policy for the repository at dir
// starts from: the toolchain image of the first ecosystem whose marker file
// is at the root (package.json, then a Python project file, then go.mod),
// else policy.DefaultBase (Debian stable, slim). Why names the file that
// chose it.
func DetectBase(dir string) Base {
	var found []Base
	for _, m := range ecosystemMarkers {
		if f := marker(dir, m.files); f != "" {
			found = append(found, Base{Ref: m.base, Why: f + " found: " + m.what + "."})
		}
	}
	if len(found) > 0 {
		b := found[0]
		for _, o := range found[1:] {
			// The other toolchains are not in the image: say so where the
			// user edits the base.
			b.Why += " Also " + strings.SplitN(o.Why, ":", 2)[0] + ": its toolchain is not in this base."
		}
		return b
	}
	return Base{Ref: policy.DefaultBase, Why: "no package.json, Python project file or go.mod at the root: Debian stable, slim."}
}

// DetectPresets returns the presets a new policy for the repository at dir
// should start with: basePresets, one per ecosystem whose marker file is at
// the root, and github only when the repository has a GitHub remote (GitHub
// is also a place data can be pushed to, so it is not opened by default).
func DetectPresets(dir string) []Preset {
	out := append([]Preset(nil), basePresets...)
	for _, m := range ecosystemMarkers {
		if marker(dir, m.files) != "" {
			out = append(out, m.preset)
		}
	}
	if cfg, err := os.ReadFile(filepath.Join(dir, ".git", "config")); err == nil && bytes.Contains(cfg, []byte("github.com")) {
		out = append(out, Preset{"github", "GitHub (the repository has a github.com remote)."})
	}
	return out
}
