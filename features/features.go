// Package features packages and publishes the devbox Dev Container Feature
// the way `devcontainer features package` / `publish` do: the same tar
// layout, the same OCI media types, annotations and tags, so any
// devcontainer.json can add the fence with one "features" line.
package features

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tailscale/hujson"

	"github.com/devbox-dev/devbox/internal/policy"
)

// Media types and annotations of the Dev Containers OCI artifacts.
const (
	ConfigMediaType     = "application/vnd.devcontainers"
	LayerMediaType      = "application/vnd.devcontainers.layer.v1+tar"
	CollectionMediaType = "application/vnd.devcontainers.collection.layer.v1+json"
	MetadataAnnotation  = "dev.containers.metadata"
	TitleAnnotation     = "org.opencontainers.image.title"
	// CollectionFile is the collection metadata file name.
	CollectionFile = "devcontainer-collection.json"
	// ManifestFile is the feature's metadata file.
	ManifestFile = "devcontainer-feature.json"
)

// featureKeys are the properties devContainerFeature.schema.json allows
// (devcontainers/spec schemas/devContainerFeature.schema.json; its
// Feature definition has additionalProperties: false).
var featureKeys = map[string]string{
	"id": "string", "version": "string", "name": "string", "description": "string",
	"documentationURL": "string", "licenseURL": "string", "options": "object",
	"capAdd": "array", "securityOpt": "array", "privileged": "boolean", "init": "boolean",
	"entrypoint": "string", "containerEnv": "object", "customizations": "object",
	"installsAfter": "array", "legacyIds": "array", "deprecated": "boolean", "mounts": "array",
	"onCreateCommand": "command", "updateContentCommand": "command", "postCreateCommand": "command",
	"postStartCommand": "command", "postAttachCommand": "command",
}

var (
	semver    = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	featureID = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*$`)
)

// Manifest is a validated devcontainer-feature.json.
type Manifest struct {
	ID      string
	Version string
	// Raw is the file as standard JSON (comments removed).
	Raw []byte
	// Fields are the top-level properties.
	Fields map[string]json.RawMessage
}

// ParseManifest reads a devcontainer-feature.json and checks it against the
// feature schema's rules: the required keys, no unknown keys, the type of
// every key, and each option's shape (type, default of that type, enum or
// proposals only on strings). name is used in error messages; every
// problem is reported.
func ParseManifest(name string, b []byte) (*Manifest, error) {
	std, err := hujson.Standardize(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(std, &fields); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	for _, k := range sortedKeys(fields) {
		want, ok := featureKeys[k]
		if !ok {
			bad("unknown key %q (not in the Dev Container Feature schema)", k)
			continue
		}
		if got := jsonKind(fields[k]); got != want && !(want == "command" && (got == "string" || got == "array" || got == "object")) {
			bad("%s is %s, want %s", k, got, want)
		}
	}
	// The metadata annotation and the collection carry the manifest as
	// compact JSON, as the CLI's JSON.stringify does.
	var compact bytes.Buffer
	if err := json.Compact(&compact, std); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m := &Manifest{Raw: compact.Bytes(), Fields: fields}
	for _, k := range []string{"id", "version"} {
		if _, ok := fields[k]; !ok {
			bad("missing required key %q", k)
		}
	}
	json.Unmarshal(fields["id"], &m.ID)
	json.Unmarshal(fields["version"], &m.Version)
	if m.ID != "" && !featureID.MatchString(m.ID) {
		bad("id %q: lower-case letters, digits and . _ - only", m.ID)
	}
	if m.Version != "" && !semver.MatchString(m.Version) {
		bad("version %q is not a semantic version X.Y.Z", m.Version)
	}
	var options map[string]map[string]json.RawMessage
	if raw, ok := fields["options"]; ok && json.Unmarshal(raw, &options) != nil {
		bad("options: each option must be an object")
	}
	for _, name := range sortedKeys(options) {
		o := options[name]
		var typ string
		json.Unmarshal(o["type"], &typ)
		allowed := map[string]bool{"type": true, "default": true, "description": true}
		switch typ {
		case "boolean":
		case "string":
			allowed["enum"], allowed["proposals"] = true, true
			if o["enum"] != nil && o["proposals"] != nil {
				bad("options.%s: enum and proposals are exclusive", name)
			}
			for _, k := range []string{"enum", "proposals"} {
				var list []string
				if o[k] != nil && json.Unmarshal(o[k], &list) != nil {
					bad("options.%s.%s must be a list of strings", name, k)
				}
			}
		default:
			bad("options.%s.type is %q, want \"boolean\" or \"string\"", name, typ)
			continue
		}
		for _, k := range sortedKeys(o) {
			if !allowed[k] {
				bad("options.%s: unknown key %q", name, k)
			}
		}
		if o["default"] == nil {
			bad("options.%s: missing default", name)
		} else if got := jsonKind(o["default"]); got != typ {
			bad("options.%s.default is %s, want %s", name, got, typ)
		}
		if o["enum"] != nil {
			var enum []string
			var def string
			json.Unmarshal(o["enum"], &enum)
			json.Unmarshal(o["default"], &def)
			if !contains(enum, def) {
				bad("options.%s.default %q is not in its enum", name, def)
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %s", name, strings.Join(errs, "; "))
	}
	return m, nil
}

func jsonKind(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid"
	}
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case float64:
		return "number"
	}
	return "null"
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// File is one file of the feature package.
type File struct {
	// Name is the path inside the package ("install.sh", "payload/…").
	Name string
	Data []byte
	Mode fs.FileMode
}

// Source is what goes into the feature package, and nothing else: the
// manifest, install.sh and the devbox binaries. Packaging never walks a
// directory, so the repository around the root manifest stays out.
type Source struct {
	Manifest []byte
	Install  []byte
	// Binaries maps "amd64"/"arm64" to a Linux devbox binary.
	Binaries map[string][]byte
	// Claude lists the Claude Code pins (from devbox.lock.json files) the
	// claudeCode option accepts; install.sh refuses any other version.
	Claude []policy.LockedClaudeCode
}

// ClaudePins renders the pins as install.sh reads them: one line per
// version and architecture, "VERSION ARCH SHA512HEX URL", sorted.
func ClaudePins(locks []policy.LockedClaudeCode) ([]byte, error) {
	var lines []string
	seen := map[string]string{}
	for _, l := range locks {
		if !semver.MatchString(l.Version) {
			return nil, fmt.Errorf("claude code version %q is not an exact X.Y.Z", l.Version)
		}
		for plat, p := range l.Platforms {
			arch, ok := strings.CutPrefix(plat, "linux/")
			if !ok || (arch != "amd64" && arch != "arm64") {
				return nil, fmt.Errorf("claude code %s: platform %q is not linux/amd64 or linux/arm64", l.Version, plat)
			}
			sum, err := sha512Hex(p.Integrity)
			if err != nil {
				return nil, fmt.Errorf("claude code %s %s: %w", l.Version, plat, err)
			}
			// The URL lands in a shell script's awk field: no blanks, https only.
			if !strings.HasPrefix(p.Tarball, "https://") || strings.ContainsAny(p.Tarball, " \t\n\r'\"\\$`") {
				return nil, fmt.Errorf("claude code %s %s: tarball %q is not a plain https URL", l.Version, plat, p.Tarball)
			}
			line := l.Version + " " + arch + " " + sum + " " + p.Tarball
			key := l.Version + " " + arch
			if prev, ok := seen[key]; ok && prev != line {
				return nil, fmt.Errorf("claude code %s %s is pinned twice, differently", l.Version, plat)
			}
			if _, ok := seen[key]; !ok {
				seen[key] = line
				lines = append(lines, line)
			}
		}
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return nil, nil
	}
	return []byte(strings.Join(lines, "\n") + "\n"), nil
}

// sha512Hex turns an SRI integrity ("sha512-<base64>") into the hex digest
// sha512sum prints.
func sha512Hex(integrity string) (string, error) {
	b64, ok := strings.CutPrefix(integrity, "sha512-")
	if !ok {
		return "", fmt.Errorf("integrity %q is not sha512", integrity)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != sha512.Size {
		return "", fmt.Errorf("integrity %q is not a valid sha512", integrity)
	}
	return hex.EncodeToString(raw), nil
}

// Files lists the package's files: the manifest, install.sh, each binary as
// payload/devbox-linux-ARCH and payload/SHA256SUMS, which install.sh checks
// before installing.
func (s Source) Files() ([]File, error) {
	if len(s.Binaries) == 0 {
		return nil, fmt.Errorf("no devbox binary to package")
	}
	files := []File{
		{Name: ManifestFile, Data: s.Manifest, Mode: 0o644},
		{Name: "install.sh", Data: s.Install, Mode: 0o755},
	}
	var sums strings.Builder
	for _, arch := range sortedKeys(s.Binaries) {
		if arch != "amd64" && arch != "arm64" {
			return nil, fmt.Errorf("binary for %q: only amd64 and arm64 are supported", arch)
		}
		name := "devbox-linux-" + arch
		sum := sha256.Sum256(s.Binaries[arch])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), name)
		files = append(files, File{Name: path.Join("payload", name), Data: s.Binaries[arch], Mode: 0o755})
	}
	pins, err := ClaudePins(s.Claude)
	if err != nil {
		return nil, err
	}
	if pins != nil {
		sum := sha256.Sum256(pins)
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), "claude-code.pins")
		files = append(files, File{Name: "payload/claude-code.pins", Data: pins, Mode: 0o644})
	}
	files = append(files, File{Name: "payload/SHA256SUMS", Data: []byte(sums.String()), Mode: 0o644})
	return files, nil
}

// Tar writes files as the CLI's feature tarball: an uncompressed ustar
// archive (the CLI names it .tgz but does not compress it) whose entries are
// "./", "./NAME", owned by 0:0, each directory's entries in byte order (the
// CLI's node-tar walks the folder with libuv's scandir, which sorts with
// strcmp). mtime is fixed so the same input gives the same digest.
func Tar(files []File, mtime time.Time) ([]byte, error) {
	files = slices.Clone(files)
	slices.SortStableFunc(files, func(a, b File) int {
		return slices.Compare(strings.Split(a.Name, "/"), strings.Split(b.Name, "/"))
	})
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dirs := map[string]bool{}
	hdr := func(h *tar.Header) error {
		h.Uid, h.Gid, h.ModTime, h.Format = 0, 0, mtime, tar.FormatUSTAR
		return tw.WriteHeader(h)
	}
	if err := hdr(&tar.Header{Typeflag: tar.TypeDir, Name: "./", Mode: 0o755}); err != nil {
		return nil, err
	}
	for _, f := range files {
		if d := path.Dir(f.Name); d != "." && !dirs[d] {
			dirs[d] = true
			if err := hdr(&tar.Header{Typeflag: tar.TypeDir, Name: "./" + d + "/", Mode: 0o755}); err != nil {
				return nil, err
			}
		}
		if err := hdr(&tar.Header{Typeflag: tar.TypeReg, Name: "./" + f.Name, Mode: int64(f.Mode.Perm()), Size: int64(len(f.Data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// TarballName is the package file name the CLI uses for a feature.
func TarballName(id string) string { return "devcontainer-feature-" + id + ".tgz" }

// Collection returns devcontainer-collection.json for the features, as the
// CLI writes it (JSON.stringify with a 4-space indent). The source is the
// CLI's own "devcontainer-cli": tools that read collections (the CLI's
// `features info`, the containers.dev index) see the same file whichever
// tool packaged it, and the E2E test compares the two byte for byte.
func Collection(ms ...*Manifest) ([]byte, error) {
	feats := make([]json.RawMessage, len(ms))
	for i, m := range ms {
		feats[i] = m.Raw
	}
	// A struct keeps the CLI's key order; a map would sort the keys.
	return marshalLikeJS(struct {
		SourceInformation struct {
			Source string `json:"source"`
		} `json:"sourceInformation"`
		Features []json.RawMessage `json:"features"`
	}{SourceInformation: struct {
		Source string `json:"source"`
	}{"devcontainer-cli"}, Features: feats}, "    ")
}

// marshalLikeJS marshals v as JavaScript's JSON.stringify(v, null, indent)
// does: no HTML escaping of < > &, no trailing newline.
func marshalLikeJS(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
