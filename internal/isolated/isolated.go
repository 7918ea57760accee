// Package isolated is devbox's isolated workspace mode: the repository lives
// in a per-container volume, cloned (objects and refs only) from a read-only
// bind of the host's checkout, so nothing the container writes ever lands
// in the checkout; commits come back to the host with Pull, which moves
// objects and refs only and runs git on the host with hooks and fsmonitor
// off.
package isolated

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/devbox-dev/devbox/internal/gitaudit"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/workspace"
)

// VolumeName is the per-container volume holding the workspace:
// ${devcontainerId} is stable across rebuilds of one dev container.
const VolumeName = "devbox-workspace-${devcontainerId}"

// WorkspaceFolder is the workspace inside the container.
const WorkspaceFolder = "/workspaces/${localWorkspaceFolderBasename}"

// VolumeMount puts the workspace volume at the workspace folder. It is one
// of "mounts": the Dev Containers CLI does not substitute
// ${devcontainerId} in workspaceMount (Docker then refuses the name).
const VolumeMount = "source=" + VolumeName + ",target=" + WorkspaceFolder + ",type=volume"

// OriginMount binds the host's checkout read-only where the clone reads it.
// It is devcontainer.json's workspaceMount in isolated mode: the one mount
// of the checkout the container gets.
const OriginMount = "source=${localWorkspaceFolder},target=" + layout.OriginDir + ",type=bind,readonly"

// CloneCommand is the onCreateCommand: it runs once, as the agent's user,
// when the container is created. It waits for the entrypoint to hand the
// empty volume over, then clones the checkout: --no-local makes git copy
// objects through its transport (no hard links into the host's object
// store), --template= installs no hooks, and clone never copies the
// origin's config. Uncommitted changes in the checkout stay on the host.
const CloneCommand = `ws="${containerWorkspaceFolder}"; i=0; ` +
	`until test -w "$ws"; do i=$((i+1)); if test $i -gt 120; then echo "devbox: $ws was not handed to $(id -un) (is the devbox entrypoint running?)" >&2; exit 1; fi; sleep 0.5; done; ` +
	`if test -e "$ws/.git"; then exit 0; fi; ` +
	`command -v git >/dev/null || { echo 'devbox: isolated mode needs git in the image (devbox images have it; add it to a base of your own)' >&2; exit 1; }; ` +
	`git -c safe.directory='*' clone --quiet --no-local --template= ` + layout.OriginDir + ` "$ws"`

// PrepareVolume hands a new, empty workspace volume to the agent's user:
// Docker creates a named volume's root as root:root 0755 when the image
// has nothing at the mount point. It does nothing to a directory that is
// not empty, not root's, or not a real directory, so the root entrypoint
// never changes anything the agent could have pointed it at.
func PrepareVolume(dir string, uid, gid int) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || !strings.HasPrefix(dir, "/workspaces/") {
		return fmt.Errorf("%s=%q: want a clean absolute path under /workspaces/", layout.IsolatedWorkspaceEnv, dir)
	}
	return prepareVolume(dir, uid, gid)
}

func prepareVolume(dir string, uid, gid int) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 {
		return nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(1)
	f.Close()
	if len(names) > 0 {
		return nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return os.Lchown(dir, uid, gid)
}

// Runner runs the docker and git calls of Pull.
type Runner = workspace.Runner

// PullOptions say where to pull from and to.
type PullOptions struct {
	// Root is the host's checkout.
	Root string
	// Docker is the docker (or podman) binary.
	Docker string
	// Container is the dev container's id; "" finds the one the Dev
	// Containers CLI started for Root (workspace.Find).
	Container string
	// User is the agent's user in the container: git there runs as it,
	// never as root, since the repository's config is the agent's.
	User string
	// Remote is the host-side namespace the branches land in:
	// refs/remotes/<Remote>/<branch>.
	Remote string
	Run    Runner
}

// HostGitArgs are the options every git command devbox runs on the host
// passes: no hooks, no fsmonitor, and objects checked as they arrive, so
// what the container sends is data, never code.
var HostGitArgs = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "transfer.fsckObjects=true",
	"-c", "fetch.fsckObjects=true",
	"-c", "protocol.allow=never",
	"-c", "protocol.file.allow=always",
}

// Pull brings the container's branches into the host's repository as
// refs/remotes/<Remote>/*: the container writes a bundle of its branches
// to stdout (as the agent's user), devbox stores it in a private
// temporary file, and then, since git 2.39 checks nothing it fetches from
// a bundle whatever fetch.fsckObjects says:
//   - the bundle's ref names are checked against a safe set
//     (gitaudit.SafeRef: refs/heads/ then letters, digits and ._/-, no
//     component led by '.' or '-', no ".."); any other is refused by name;
//   - the bundle is fetched into a quarantine repository (a new bare one,
//     no template, in a private temporary directory), and `git fsck
//     --strict` must pass there;
//   - the host's repository fetches from the quarantine over git's local
//     transport, which does check objects (transfer.fsckObjects), with
//     HostGitArgs.
//
// Local branches are never moved; merge what you reviewed.
func Pull(ctx context.Context, o PullOptions) (string, error) {
	if o.Remote == "" {
		o.Remote = "devbox"
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return "", err
	}
	c, err := workspace.Find(ctx, workspace.FindOptions{Folder: root, Container: o.Container, Docker: o.Docker, Run: o.Run})
	if err != nil {
		return "", err
	}
	ws := c.Getenv(layout.IsolatedWorkspaceEnv)
	if ws == "" {
		return "", fmt.Errorf("container %s is not in isolated mode (no %s): its workspace is the checkout itself", c.Name, layout.IsolatedWorkspaceEnv)
	}
	o.Container = c.ID
	bundle, err := o.Run.Output(ctx, nil, o.Docker, "exec", "-u", o.User, o.Container, "git", "-C", ws, "bundle", "create", "-", "--branches")
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "devbox-pull-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	bundlePath, quarantine := filepath.Join(tmp, "branches.bundle"), filepath.Join(tmp, "quarantine.git")
	if err := os.WriteFile(bundlePath, bundle, 0o600); err != nil {
		return "", err
	}
	git := func(dir string, args ...string) ([]byte, error) {
		return o.Run.Output(ctx, nil, "git", append(append([]string{"-C", dir}, HostGitArgs...), args...)...)
	}
	if _, err := o.Run.Output(ctx, nil, "git", append(append([]string{}, HostGitArgs...), "init", "--quiet", "--bare", "--template=", quarantine)...); err != nil {
		return "", err
	}
	heads, err := git(quarantine, "bundle", "list-heads", bundlePath)
	if err != nil {
		return "", err
	}
	refspecs, err := bundleRefspecs(heads)
	if err != nil {
		return "", err
	}
	if len(refspecs) == 0 {
		return "", errors.New("the container's bundle has no branch")
	}
	if _, err := git(quarantine, append([]string{"fetch", "--no-tags", "--no-write-fetch-head", bundlePath}, refspecs...)...); err != nil {
		return "", err
	}
	if _, err := git(quarantine, "fsck", "--strict", "--no-dangling", "--no-progress"); err != nil {
		return "", fmt.Errorf("the container's commits fail git fsck --strict; nothing was fetched: %w", err)
	}
	if _, err := git(root, "fetch", "--no-tags", "--no-write-fetch-head", quarantine, "+refs/heads/*:refs/remotes/"+o.Remote+"/*"); err != nil {
		return "", err
	}
	refs, err := git(root, "for-each-ref", "--format=%(refname:short) %(objectname:short) %(subject)", "refs/remotes/"+o.Remote+"/")
	return string(refs), err
}

// bundleRefspecs reads `git bundle list-heads` ("<oid> <ref>" lines) and
// returns a "+ref:ref" refspec per branch, or an error naming every ref
// outside the safe set.
func bundleRefspecs(heads []byte) ([]string, error) {
	var specs, refused []string
	for _, line := range strings.Split(strings.TrimSuffix(string(heads), "\n"), "\n") {
		if line == "" {
			continue
		}
		_, ref, ok := strings.Cut(line, " ")
		if !ok || !gitaudit.SafeRef(ref) {
			refused = append(refused, strconv.Quote(ref))
			continue
		}
		specs = append(specs, "+"+ref+":"+ref)
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("the container's bundle has ref names outside the safe set (refs/heads/ then letters, digits, '.', '_', '/', '-'; no component starting with '.' or '-'; no '..'), nothing was fetched: %s",
			strings.Join(refused, ", "))
	}
	return specs, nil
}
