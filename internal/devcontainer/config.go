package devcontainer

import (
	"path"
	"sort"
	"strings"

	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/isolated"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// labelOnly are image.FenceProperties keys that devcontainer.json does not accept:
// the Dev Containers CLI reads "entrypoint" only from the image's
// devcontainer.metadata label and from features. In build mode the
// generated Dockerfile carries the label; in image mode the image does.
var labelOnly = map[string]bool{"entrypoint": true}

// ConfigProperties returns the fence's properties that belong in
// devcontainer.json: image.FenceProperties without the label-only keys.
func ConfigProperties(p *policy.Policy) map[string]any {
	out := map[string]any{}
	for k, v := range image.FenceProperties(p) {
		if !labelOnly[k] {
			out[k] = v
		}
	}
	return out
}

// SeccompRunArg is the docker run option devcontainer.json carries when the
// policy enables the sandbox: devbox's seccomp profile (Docker's default
// plus the namespace calls bubblewrap needs), which init writes to
// SeccompFile. The path is the host's, resolved by the Dev Containers CLI.
const SeccompRunArg = "--security-opt=seccomp=${localWorkspaceFolder}/" + SeccompFile

// HomeDir is the agent user's home directory inside the container.
func HomeDir(p *policy.Policy) string { return path.Join("/home", p.Image.User.Name) }

// ClaudeVolume is the named volume that keeps Claude Code's configuration
// and login per container: ${devcontainerId} is stable across rebuilds of
// one dev container and different between two.
const ClaudeVolume = "devbox-claude-${devcontainerId}"

// startCommand is the initializeCommand: it runs on the host before every
// start. First `devbox audit`: anything the container planted for host git
// (a hook, a core.fsmonitor, a new nested repository) stops the start until
// the user has reviewed it (docs/git.md). Then `devbox init` refreshes what
// is generated: the build context (git-ignored, so a policy edit reaches
// the image, never a stale copy; --lock resolves the lock only when the
// edit moved one of its inputs) and the read-only mounts of the git
// directories that exist now (they apply when the container is next
// created). Without devbox on the host, build mode runs the audit with the
// Linux binary init copied (read-only inside the container) and stops with
// a clear message where it cannot run; image mode has no copy and stops.
func startCommand(l hostLayout) string {
	initArgs := "init --lock"
	if l.image != "" {
		initArgs = "init --image " + l.image
	}
	if l.isolated {
		initArgs += " --isolated"
	}
	head := startCommandPrefix + "audit && devbox " + initArgs + "; "
	if l.image != "" {
		return head + "else echo 'devbox: install devbox on this host: `devbox audit` must check the git hooks and config the container could have planted before every start' >&2; exit 1; fi"
	}
	return head + "elif test -f " + BinaryFile + "; then " + BinaryFile + " audit || { echo 'devbox: the git audit failed (above), or this host cannot run " + BinaryFile + ": install devbox' >&2; exit 1; }; " +
		"else echo 'devbox: " + BinaryFile + " is missing: install devbox and run `devbox init` in this repository' >&2; exit 1; fi"
}

// ownIsolated says a value is init's own isolated-mode value: this one, or
// (for the clone command) any earlier version of it.
func ownIsolated(want string) func(any) bool {
	return func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return false
		}
		if want == isolated.CloneCommand {
			return strings.HasPrefix(s, `ws="${containerWorkspaceFolder}"`)
		}
		return s == want
	}
}

// startCommandPrefix starts every initializeCommand devbox init has
// written, this version's and earlier ones: a value with it is init's own
// and is replaced; any other is the user's and stays.
const startCommandPrefix = "if command -v devbox >/dev/null 2>&1; then devbox "

func ownStartCommand(v any) bool {
	s, ok := v.(string)
	return ok && strings.HasPrefix(s, startCommandPrefix)
}

// hostLayout describes what is on the host that the rules depend on.
type hostLayout struct {
	// image is the prebuilt image reference; "" builds from the Dockerfile.
	image string
	// isolated: the workspace is a clone in a volume (InitOptions.Isolated).
	isolated bool
	// podmanRootful: the engine is rootful Podman (PodmanRootfulRunArg).
	podmanRootful bool
	// readOnly are the paths to mount read-only, relative to the
	// workspace: every git directory's hooks/, config and config.worktree,
	// and the files and directories other tools run (.vscode, .claude,
	// .mcp.json, .envrc, …: gitaudit's run-later names), that exist (a bind
	// mount of a missing path fails the start).
	readOnly []string
}

// roMount is a read-only bind of a workspace path over itself.
func roMount(rel string) string {
	return "source=${localWorkspaceFolder}/" + rel + ",target=${containerWorkspaceFolder}/" + rel + ",type=bind,readonly"
}

// mounts are the read-only bind mounts that stop code in the container from
// planting what the host later runs (git hooks, git config aliases and
// fsmonitor of every git directory, editor and agent settings, .envrc, the
// dev container definition itself), plus Claude's volume. They are init's
// block of "mounts", rewritten by every init.
func mounts(p *policy.Policy, l hostLayout) []string {
	var out []string
	if l.isolated {
		// The workspace is the volume; the checkout is seen only through
		// workspaceMount, read-only, to clone from.
		out = append(out, isolated.VolumeMount)
	} else {
		out = append(out, roMount(Dir))
		for _, rel := range l.readOnly {
			out = append(out, roMount(rel))
		}
	}
	if l.image != "" {
		// A prebuilt image carries the team's policy; the repository's own
		// reaches the entrypoint here, which applies it only when it
		// narrows the image's baseline.
		out = append(out, repoPolicyMount)
	}
	out = append(out, claudeMount(p))
	if !p.Credentials.IsZero() {
		// The credential gateway's secrets: one volume per container,
		// kept across rebuilds, readable by root and the gateway only
		// (the image's empty directory gives the new volume its modes).
		out = append(out, secretsMount)
	}
	return out
}

// repoPolicyMount is image mode's read-only bind of the repository's policy.
const repoPolicyMount = "source=${localWorkspaceFolder}/" + PolicyFile + ",target=" + layout.RepoPolicyPath + ",type=bind,readonly"

// secretsMount is the credential gateway's secrets volume.
const secretsMount = "source=" + SecretsVolume + ",target=" + layout.SecretsDir + ",type=volume"

func claudeMount(p *policy.Policy) string {
	return "source=" + ClaudeVolume + ",target=" + path.Join(HomeDir(p), layout.ClaudeDir) + ",type=volume"
}

// legacyMounts are the mounts init wrote, one by one, before the block.
func legacyMounts(p *policy.Policy) []string {
	return []string{roMount(Dir), roMount(".git/hooks"), roMount(".git/config"), repoPolicyMount, claudeMount(p), secretsMount}
}

// SecretsVolume is the named volume holding the credential gateway's
// secrets (`devbox secret set`), one per dev container.
const SecretsVolume = "devbox-secrets-${devcontainerId}"

// configRules is the desired state of devcontainer.json for policy p.
// Patching applies it to a user's file and to the template alike, so a new
// file and a patched one get the same keys.
func configRules(p *policy.Policy, l hostLayout) []rule {
	var rs []rule
	if l.image != "" {
		rs = append(rs,
			rule{path: []string{"build"}, kind: remove},
			rule{path: []string{"initializeCommand"}, kind: setIfOwned, value: startCommand(l), owned: ownStartCommand},
			rule{path: []string{"image"}, kind: set, value: l.image},
		)
	} else {
		rs = append(rs,
			rule{path: []string{"image"}, kind: remove},
			rule{path: []string{"build", "dockerfile"}, kind: set, value: "Dockerfile"},
			rule{path: []string{"build", "context"}, kind: set, value: ".devbox"},
			rule{path: []string{"initializeCommand"}, kind: setIfOwned, value: startCommand(l), owned: ownStartCommand},
			// When the Dev Containers CLI builds from a Dockerfile it
			// derives the container's metadata from the FROM image and
			// devcontainer.json only, so the "entrypoint" in the label of
			// the image it just built is never run and the fence would not
			// start. With overrideCommand false the CLI keeps the image's
			// ENTRYPOINT, `devbox entrypoint -- sleep infinity`, which
			// installs the fence and then drops to the user.
			rule{path: []string{"overrideCommand"}, kind: set, value: false},
		)
	}
	props := ConfigProperties(p)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if list, ok := props[k].([]string); ok {
			rs = append(rs, rule{path: []string{k}, kind: union, value: list})
		} else {
			rs = append(rs, rule{path: []string{k}, kind: set, value: props[k]})
		}
	}
	if p.Sandbox.Enabled {
		// bubblewrap needs user namespaces, which Docker's default seccomp
		// profile forbids; runArgs is not a metadata property, so the
		// profile goes here, as one element (a union keeps it whole).
		rs = append(rs, rule{path: []string{"runArgs"}, kind: union, value: []string{SeccompRunArg}})
	}
	if l.podmanRootful {
		// Added, never removed: the initializeCommand's init (without
		// --engine) keeps it, and a user moving off rootful Podman deletes
		// it by hand (docs/runtime.md).
		rs = append(rs, rule{path: []string{"runArgs"}, kind: union, value: []string{PodmanRootfulRunArg}})
	}
	// Isolated mode: the workspace is a volume cloned from a read-only
	// bind of the checkout (internal/isolated); back in the default mode
	// init's own values go away, a user's stay.
	isoRules := []rule{
		{path: []string{"workspaceMount"}, value: isolated.OriginMount},
		{path: []string{"workspaceFolder"}, value: isolated.WorkspaceFolder},
		{path: []string{"onCreateCommand"}, value: isolated.CloneCommand},
		{path: []string{"containerEnv", layout.IsolatedWorkspaceEnv}, value: isolated.WorkspaceFolder},
	}
	for _, r := range isoRules {
		if l.isolated {
			r.kind, r.owned = setIfOwned, ownIsolated(r.value.(string))
		} else {
			r.kind = removeIfEqual
		}
		rs = append(rs, r)
	}
	return append(rs,
		rule{path: []string{"mounts"}, kind: block, value: mounts(p, l), legacy: legacyMounts(p)},
		// One directory holds all of Claude Code's state (it otherwise also
		// writes ~/.claude.json), so the volume above keeps all of it.
		rule{path: []string{"containerEnv", "CLAUDE_CONFIG_DIR"}, kind: set, value: path.Join(HomeDir(p), layout.ClaudeDir)},
	)
}
