package policy

import (
	"fmt"
	"maps"
	"slices"
)

// presetEntry is one destination of a preset and why it is there. The hosts
// below are data: devbox's tests never contact them.
type presetEntry struct {
	dest string
	why  string
}

// presetTable is every preset, in one place. Entries are HTTPS (443) unless
// the tool really uses something else; keep the reason honest, and mark
// what is optional so users can deny it.
var presetTable = map[string][]presetEntry{
	"anthropic": {
		{"api.anthropic.com:443", "the Claude API: every model request of Claude Code (required)"},
		{"statsig.anthropic.com:443", "Claude Code feature flags and usage telemetry (optional: Claude Code runs without it; DISABLE_TELEMETRY=1 stops it)"},
		{"statsig.com:443", "older Claude Code versions fetch feature flags here (optional telemetry)"},
		{"sentry.io:443", "Claude Code error reports (optional: DISABLE_ERROR_REPORTING=1 stops them)"},
	},
	"claude-login": {
		{"claude.ai:443", "OAuth sign-in for Claude subscriptions (/login opens it)"},
		{"claude.com:443", "OAuth sign-in and account pages on the newer domain"},
		{"platform.claude.com:443", "OAuth token exchange for Console (API) accounts"},
		{"console.anthropic.com:443", "OAuth sign-in and API key creation for Console accounts (older domain)"},
	},
	"github": {
		{"github.com:443", "git over HTTPS, releases and the web UI"},
		{"github.com:22", "git over SSH"},
		{"api.github.com:443", "the REST/GraphQL API (gh, actions tooling, dependency resolvers)"},
		{"codeload.github.com:443", "source archives (tarball/zipball downloads, go get of some modules)"},
		{"*.githubusercontent.com:443", "raw files, release assets, avatars and LFS objects (raw., objects., media., release-assets.)"},
	},
	"npm": {
		{"registry.npmjs.org:443", "the npm registry: package metadata and tarballs"},
	},
	"pypi": {
		{"pypi.org:443", "the Python Package Index: the simple/JSON APIs pip and uv query"},
		{"files.pythonhosted.org:443", "where PyPI serves the wheels and sdists themselves"},
	},
	"go": {
		{"proxy.golang.org:443", "the Go module proxy (GOPROXY default)"},
		{"sum.golang.org:443", "the checksum database go verifies every module against (GOSUMDB default)"},
		{"storage.googleapis.com:443", "the module proxy redirects some zip downloads here; also hosts Go toolchain downloads (GOTOOLCHAIN)"},
	},
	"debian": {
		{"deb.debian.org:80", "the Debian archive over plain HTTP, which apt uses by default (packages are signed)"},
		{"deb.debian.org:443", "the Debian archive over HTTPS"},
		{"security.debian.org:80", "security updates, apt's default for debian-security on older setups"},
		{"security.debian.org:443", "security updates over HTTPS"},
	},
	"vscode": {
		{"marketplace.visualstudio.com:443", "the extension marketplace (search, metadata)"},
		{"*.gallery.vsassets.io:443", "extension packages are downloaded from here"},
		{"*.gallerycdn.vsassets.io:443", "the marketplace CDN for extension packages and icons"},
		{"update.code.visualstudio.com:443", "VS Code server and client updates"},
		{"*.vscode-cdn.net:443", "VS Code server downloads and web assets"},
		{"vscode.download.prss.microsoft.com:443", "VS Code server downloads (the update service redirects here)"},
	},
}

// presets is presetTable parsed once; a bad entry is a programming error.
var presets = func() map[string][]Destination {
	m := make(map[string][]Destination, len(presetTable))
	for name, entries := range presetTable {
		for _, e := range entries {
			d, err := ParseDestination(e.dest)
			if err != nil {
				panic(fmt.Sprintf("policy: preset %s: %v", name, err))
			}
			m[name] = append(m[name], d)
		}
	}
	return m
}()

// PresetNames returns the known preset names, sorted.
func PresetNames() []string {
	return slices.Sorted(maps.Keys(presetTable))
}

// PresetEntry is one destination of a preset with the reason it is there.
type PresetEntry struct {
	Destination Destination `json:"destination"`
	Why         string      `json:"why"`
}

// Preset returns the entries of a named preset, or false if there is no
// such preset.
func Preset(name string) ([]PresetEntry, bool) {
	entries, ok := presetTable[name]
	if !ok {
		return nil, false
	}
	out := make([]PresetEntry, len(entries))
	for i, e := range entries {
		out[i] = PresetEntry{Destination: presets[name][i], Why: e.why}
	}
	return out, true
}
