package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// MetadataLabel is the label the Dev Containers CLI reads image metadata
// from.
const MetadataLabel = "devcontainer.metadata"

// Labels devbox adds besides the OCI ones.
const (
	// LabelPolicy holds the normalized policy (the same bytes as
	// layout.PolicyPath), so a registry UI or `docker inspect` shows
	// what an image enforces without running it.
	LabelPolicy = "dev.devbox.policy"
	// LabelPolicyDigest is the sha256 of LabelPolicy.
	LabelPolicyDigest = "dev.devbox.policy.digest"
	// LabelClaudeCode is the pinned Claude Code version ("none" when left
	// out).
	LabelClaudeCode = "dev.devbox.claude-code"
	// LabelBaseline holds the team baseline baked at layout.BaselinePath
	// by `devbox build --baseline` (normalized, compacted), so `devbox
	// policy validate` can check a repository against the image's
	// baseline without pulling it; LabelBaselineDigest is the sha256 of
	// the baked file.
	LabelBaseline       = "dev.devbox.baseline"
	LabelBaselineDigest = "dev.devbox.baseline.digest"
)

// Entrypoint and Cmd of every devbox image: the entrypoint installs the
// fence as root, then runs Cmd as the policy's user. The Dev Containers CLI
// overrides both and runs the label's "entrypoint" instead.
var (
	Entrypoint = []string{layout.BinaryPath, "entrypoint", "--"}
	Cmd        = []string{"sleep", "infinity"}
)

// Env is the environment devbox gives the image, over the base image's
// own (see ImageEnv).
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	// Claude Code's self-updater would replace the pinned binary (in the
	// user's home); managed settings say the same.
	"DISABLE_AUTOUPDATER=1",
	// A UTF-8 locale without the locales package: C.UTF-8 is built into
	// Debian's libc.
	"LANG=C.UTF-8",
}

// ImageEnv returns the image's environment: the base image's (a Node,
// Python or Go image sets its toolchain's PATH, versions and GOPATH there),
// then Env's variables, which win, except PATH: the base's PATH is kept when
// it has one, so the toolchain stays on it.
func ImageEnv(base []string) []string {
	out := slices.Clone(base)
	index := map[string]int{}
	for i, e := range out {
		k, _, _ := strings.Cut(e, "=")
		index[k] = i
	}
	for _, e := range Env {
		k, _, _ := strings.Cut(e, "=")
		i, ok := index[k]
		switch {
		case !ok:
			index[k] = len(out)
			out = append(out, e)
		case k != "PATH":
			out[i] = e
		}
	}
	return out
}

// Metadata returns the devcontainer.metadata label value: a JSON array with
// one object, as the Dev Containers CLI writes it, carrying what a bare
// {"image": "…"} devcontainer.json needs to start the fence.
func Metadata(p *policy.Policy) (string, error) {
	b, err := json.Marshal([]map[string]any{FenceProperties(p)})
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Labels returns the image labels for spec; Annotations the same OCI keys as
// manifest annotations.
func Labels(spec Spec, devboxVersion string) (map[string]string, error) {
	md, err := Metadata(spec.Policy)
	if err != nil {
		return nil, err
	}
	pj, err := PolicyJSON(spec.Policy)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(pj)
	// One line: a label value with newlines does not survive a Dockerfile.
	var compact bytes.Buffer
	if err := json.Compact(&compact, pj); err != nil {
		return nil, err
	}
	l := map[string]string{
		MetadataLabel:     md,
		LabelPolicy:       compact.String(),
		LabelPolicyDigest: "sha256:" + hex.EncodeToString(sum[:]),
		LabelClaudeCode:   spec.Policy.Agent.ClaudeCode,
	}
	if spec.Baseline != nil {
		bj, err := PolicyJSON(spec.Baseline)
		if err != nil {
			return nil, err
		}
		var bc bytes.Buffer
		if err := json.Compact(&bc, bj); err != nil {
			return nil, err
		}
		bsum := sha256.Sum256(bj)
		l[LabelBaseline] = bc.String()
		l[LabelBaselineDigest] = "sha256:" + hex.EncodeToString(bsum[:])
	}
	maps.Copy(l, ociAnnotations(spec, devboxVersion))
	return l, nil
}

func ociAnnotations(spec Spec, devboxVersion string) map[string]string {
	a := map[string]string{
		"org.opencontainers.image.created":     Created(spec.Lock).Format(time.RFC3339),
		"org.opencontainers.image.version":     devboxVersion,
		"org.opencontainers.image.base.name":   spec.Lock.Base.Ref,
		"org.opencontainers.image.base.digest": spec.Lock.Base.Digest,
		"org.opencontainers.image.title":       "devbox sandbox for " + spec.Policy.Image.User.Name,
	}
	if spec.Source != "" {
		a["org.opencontainers.image.source"] = spec.Source
	}
	return a
}

// Annotations returns the OCI annotations for the manifest (and index).
func Annotations(spec Spec, devboxVersion string) map[string]string {
	return ociAnnotations(spec, devboxVersion)
}

// Created is the image creation time: the lock's SOURCE_DATE_EPOCH.
func Created(l *policy.Lock) time.Time {
	return time.Unix(l.SourceDateEpoch, 0).UTC()
}

// imageConfig is the part of the OCI image config devbox sets; BuildKit's
// exporter fills in rootfs, and history when it is not given.
type imageConfig struct {
	Created      string             `json:"created"`
	Architecture string             `json:"architecture"`
	OS           string             `json:"os"`
	Variant      string             `json:"variant,omitempty"`
	Config       containerConfig    `json:"config"`
	History      []ocispecs.History `json:"history,omitempty"`
}

type containerConfig struct {
	User       string            `json:"User"`
	Env        []string          `json:"Env"`
	Entrypoint []string          `json:"Entrypoint"`
	Cmd        []string          `json:"Cmd"`
	WorkingDir string            `json:"WorkingDir"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// ConfigJSON returns the OCI image config of spec's heavy image (Graph) as
// BuildKit's exporter takes it (containerimage.config): user, environment,
// entrypoint and the history of the heavy layers, and no labels: they
// follow the policy, and Assemble sets them with the tail. base is the base
// image's config as the build resolved it (nil: leave the history to
// BuildKit); with it the config carries the heavy layers' whole history (see
// History).
func ConfigJSON(spec Spec, base []byte) ([]byte, error) {
	history, err := History(spec, base)
	if err != nil {
		return nil, err
	}
	var baseEnv []string
	if base != nil {
		var bc ocispecs.Image
		if err := json.Unmarshal(base, &bc); err != nil {
			return nil, fmt.Errorf("base image config: %w", err)
		}
		baseEnv = bc.Config.Env
	}
	os, arch, ok := strings.Cut(spec.Platform, "/")
	if !ok {
		return nil, fmt.Errorf("platform %q is not os/arch", spec.Platform)
	}
	variant := ""
	if arch == "arm64" {
		variant = "v8"
	}
	return json.Marshal(imageConfig{
		Created:      Created(spec.Lock).Format(time.RFC3339),
		Architecture: arch,
		OS:           os,
		Variant:      variant,
		Config: containerConfig{
			// Root: the entrypoint installs the fence, then drops to the
			// policy's user itself.
			User:       "root",
			Env:        ImageEnv(baseEnv),
			Entrypoint: slices.Clone(Entrypoint),
			Cmd:        slices.Clone(Cmd),
			WorkingDir: "/",
		},
		History: history,
	})
}

// History returns the heavy image's history: the base image's entries, made
// to count one non-empty entry per base layer, then one entry per layer
// BuildKit adds, named after its step and dated at the lock's epoch. The
// tail layer's entry (TailHistory) is added by Assemble.
//
// Left to itself BuildKit describes a layer by how this daemon got it: the
// step's command when it ran, "imported sha256:…" when it came from a
// --cache-from registry cache. The config, and so the image digest, would
// then depend on the machine's cache, not only on the policy and the lock.
func History(spec Spec, base []byte) ([]ocispecs.History, error) {
	if base == nil {
		return nil, nil
	}
	var bc ocispecs.Image
	if err := json.Unmarshal(base, &bc); err != nil {
		return nil, fmt.Errorf("base image config: %w", err)
	}
	var out []ocispecs.History
	layers := 0
	for _, h := range bc.History {
		if !h.EmptyLayer {
			if layers == len(bc.RootFS.DiffIDs) {
				// More entries than layers: BuildKit would mark the extra
				// ones empty from the bottom; keep what the layers explain.
				h.EmptyLayer = true
			} else {
				layers++
			}
		}
		out = append(out, h)
	}
	created := Created(spec.Lock)
	for ; layers < len(bc.RootFS.DiffIDs); layers++ {
		out = append(out, ocispecs.History{Created: &created,
			CreatedBy: fmt.Sprintf("base layer %d of %s", layers+1, spec.Lock.Base.Pinned())})
	}
	steps, err := Steps(spec)
	if err != nil {
		return nil, err
	}
	for _, st := range steps {
		if st.Stage != "" || st.Kind == FetchStep || st.Tail {
			continue // throwaway stages leave no layer in the image; the tail is Assemble's
		}
		out = append(out, ocispecs.History{Created: &created, CreatedBy: VertexPrefix + st.Name, Comment: "devbox"})
	}
	return out, nil
}
