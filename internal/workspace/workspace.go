// Package workspace finds the dev container that the Dev Containers CLI
// (or VS Code, which runs the same engine) started for a folder on the
// host, through the container engine's CLI (docker or podman), and says
// how to run a command in it.
package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

// LocalFolderLabel is the label the Dev Containers CLI puts on every
// container it creates: the absolute path of the host folder it was
// started for. It is how a command run in a repository finds its container.
const LocalFolderLabel = "devcontainer.local_folder"

// MetadataLabel carries the merged devcontainer.json snippets of the
// image, its features and the repository's config (a JSON array): the
// remote user and remote environment come from it.
const MetadataLabel = "devcontainer.metadata"

// DockerPathEnv names the engine's CLI when --docker-path is not given.
const DockerPathEnv = "DEVBOX_DOCKER_PATH"

// StartCommand is what starts this workspace's container; the errors name it.
const StartCommand = "devbox up"

// Runner runs a command and returns its standard output. Engine calls go
// through it, so tests can answer them.
type Runner interface {
	Output(ctx context.Context, env []string, name string, args ...string) ([]byte, error)
}

// ExecRunner is Runner with os/exec; a failure's error carries the
// command's standard error.
type ExecRunner struct{}

func (ExecRunner) Output(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, &CommandError{Args: append([]string{name}, args...), Err: err, Stderr: strings.TrimSpace(stderr.String())}
	}
	return out, nil
}

// CommandError is a command that failed: how, and what it wrote to
// standard error.
type CommandError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.Args, " "), e.Err, e.Stderr)
}

func (e *CommandError) Unwrap() error { return e.Err }

// Engine returns the container engine's CLI: path when given (the
// --docker-path flag or DEVBOX_DOCKER_PATH), else docker when it is on
// the PATH, else podman, as `devbox init` suggests them. lookPath is
// exec.LookPath outside tests.
func Engine(path string, lookPath func(string) (string, error)) (string, error) {
	if path != "" {
		if _, err := lookPath(path); err != nil {
			return "", fmt.Errorf("the container engine %q (--docker-path or %s) is not found: %v", path, DockerPathEnv, err)
		}
		return path, nil
	}
	for _, name := range []string{"docker", "podman"} {
		if _, err := lookPath(name); err == nil {
			return name, nil
		}
	}
	return "", errors.New("neither docker nor podman is on the PATH: install Docker Engine or Podman, or name the CLI with --docker-path")
}

// Container is a running dev container and what commands run in it need.
type Container struct {
	ID   string
	Name string
	// LocalFolder is the host folder it was started for (LocalFolderLabel).
	LocalFolder string
	// RemoteUser is the user editors and `devcontainer exec` run as: the
	// last remoteUser of the metadata, else its containerUser, else the
	// image's user.
	RemoteUser string
	// RemoteEnv is the metadata's remoteEnv as KEY=VALUE, without the
	// values that need the CLI's ${…} substitution.
	RemoteEnv []string
	// WorkspaceFolder is where the repository is inside.
	WorkspaceFolder string
	// Env is the container's environment (containerEnv and the image's).
	Env []string
}

// Getenv returns the container environment's value of key.
func (c Container) Getenv(key string) string {
	for _, kv := range c.Env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// ErrNoContainer is wrapped by Find's error when no container runs for
// the folder.
var ErrNoContainer = errors.New("no running dev container")

// FindOptions say which container to find.
type FindOptions struct {
	// Folder is the host folder (the repository); relative to the
	// working directory.
	Folder string
	// Container is an id or name given with --container; "" finds the
	// one the Dev Containers CLI started for Folder.
	Container string
	// Docker is the engine's CLI (see Engine).
	Docker string
	Run    Runner
}

// Find returns the running dev container for o.Folder. No container, more
// than one, and an engine that does not answer are errors that say what
// to do.
func Find(ctx context.Context, o FindOptions) (Container, error) {
	root, err := filepath.Abs(o.Folder)
	if err != nil {
		return Container{}, err
	}
	id := o.Container
	if id == "" {
		out, err := o.Run.Output(ctx, nil, o.Docker, "ps", "--filter", "label="+LocalFolderLabel+"="+root,
			"--format", "{{.ID}}\t{{.Names}}\t{{.Image}}\t{{.Status}}")
		if err != nil {
			return Container{}, engineError(o.Docker, err)
		}
		var rows [][]string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "" {
				rows = append(rows, strings.Split(line, "\t"))
			}
		}
		switch len(rows) {
		case 0:
			return Container{}, fmt.Errorf("%w for %s (label %s=%s on %s): start one with `%s` in that folder (or VS Code: Reopen in Container)",
				ErrNoContainer, root, LocalFolderLabel, root, o.Docker, StartCommand)
		case 1:
			id = rows[0][0]
		default:
			var b strings.Builder
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "  ID\tNAME\tIMAGE\tSTATUS")
			for _, r := range rows {
				fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
			}
			tw.Flush()
			return Container{}, fmt.Errorf("%d dev containers run for %s; pick one with --container ID:\n%s", len(rows), root, strings.TrimRight(b.String(), "\n"))
		}
	}
	out, err := o.Run.Output(ctx, nil, o.Docker, "container", "inspect", id)
	if err != nil {
		if o.Container != "" {
			return Container{}, fmt.Errorf("--container %s: %w", o.Container, engineError(o.Docker, err))
		}
		return Container{}, engineError(o.Docker, err)
	}
	c, err := parseInspect(out, root)
	if err != nil {
		return Container{}, fmt.Errorf("%s container inspect %s: %w", o.Docker, id, err)
	}
	return c, nil
}

// engineError says that the engine did not answer, and what to check.
func engineError(docker string, err error) error {
	var ce *CommandError
	if errors.As(err, &ce) && strings.Contains(ce.Stderr, "No such container") {
		return fmt.Errorf("%s: no such container", ce.Args[len(ce.Args)-1])
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the container engine %q is not installed (or not on the PATH): %v; pass --docker-path or set %s", docker, err, DockerPathEnv)
	}
	hint := "is the engine running, and DOCKER_HOST (or CONTAINER_HOST for podman) right?"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		hint = "is the engine running at DOCKER_HOST=" + h + "?"
	}
	what := err.Error()
	if errors.As(err, &ce) && ce.Stderr != "" {
		what = ce.Stderr
	}
	return fmt.Errorf("cannot reach the container engine through %s: %s (%s)", docker, what, hint)
}

// inspect is the part of `docker container inspect` (and podman's, which
// has the same shape) that Find reads.
type inspect struct {
	ID     string `json:"Id"`
	Name   string `json:"Name"`
	Config struct {
		User   string            `json:"User"`
		Env    []string          `json:"Env"`
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	State struct {
		Running bool   `json:"Running"`
		Status  string `json:"Status"`
	} `json:"State"`
	Mounts []struct {
		Type        string `json:"Type"`
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
	} `json:"Mounts"`
}

// metadataSnippet is the part of one devcontainer.metadata entry Find reads.
type metadataSnippet struct {
	RemoteUser    string            `json:"remoteUser"`
	ContainerUser string            `json:"containerUser"`
	RemoteEnv     map[string]string `json:"remoteEnv"`
}

func parseInspect(out []byte, root string) (Container, error) {
	var list []inspect
	if err := json.Unmarshal(out, &list); err != nil {
		return Container{}, err
	}
	if len(list) != 1 {
		return Container{}, fmt.Errorf("want one container, got %d", len(list))
	}
	in := list[0]
	c := Container{
		ID:          in.ID,
		Name:        strings.TrimPrefix(in.Name, "/"),
		LocalFolder: in.Config.Labels[LocalFolderLabel],
		Env:         in.Config.Env,
	}
	if !in.State.Running {
		return Container{}, fmt.Errorf("%w: %s is %s: start it with `%s`", ErrNoContainer, c.Name, in.State.Status, StartCommand)
	}
	if raw := in.Config.Labels[MetadataLabel]; raw != "" {
		var snippets []metadataSnippet
		if err := json.Unmarshal([]byte(raw), &snippets); err != nil {
			// A single object is allowed too.
			var one metadataSnippet
			if err1 := json.Unmarshal([]byte(raw), &one); err1 != nil {
				return Container{}, fmt.Errorf("label %s: %v", MetadataLabel, err)
			}
			snippets = []metadataSnippet{one}
		}
		var containerUser string
		env := map[string]string{}
		var keys []string
		for _, s := range snippets {
			if s.RemoteUser != "" {
				c.RemoteUser = s.RemoteUser
			}
			if s.ContainerUser != "" {
				containerUser = s.ContainerUser
			}
			for k, v := range s.RemoteEnv {
				if _, seen := env[k]; !seen {
					keys = append(keys, k)
				}
				env[k] = v
			}
		}
		if c.RemoteUser == "" {
			c.RemoteUser = containerUser
		}
		for _, k := range keys {
			if v := env[k]; !strings.Contains(v, "${") {
				c.RemoteEnv = append(c.RemoteEnv, k+"="+v)
			}
		}
	}
	if c.RemoteUser == "" {
		c.RemoteUser = in.Config.User
	}
	if c.RemoteUser == "" {
		c.RemoteUser = "root"
	}
	folder := c.LocalFolder
	if folder == "" {
		folder = root
	}
	c.WorkspaceFolder = c.Getenv(layout.IsolatedWorkspaceEnv)
	for _, m := range in.Mounts {
		if c.WorkspaceFolder == "" && m.Type == "bind" && filepath.Clean(m.Source) == filepath.Clean(folder) {
			c.WorkspaceFolder = m.Destination
		}
	}
	if c.WorkspaceFolder == "" {
		c.WorkspaceFolder = path.Join("/workspaces", filepath.Base(folder))
	}
	return c, nil
}

// ExecOptions shape one `docker exec`.
type ExecOptions struct {
	// User runs the command ("" is the remote user).
	User string
	// Workdir is its working directory ("" is the workspace folder for
	// the remote user, the engine's default for another user).
	Workdir string
	// Stdin keeps standard input open (-i); TTY allocates a terminal (-t).
	Stdin, TTY bool
	// Env are more KEY=VALUE for the command.
	Env []string
}

// ExecArgs returns the engine's arguments that run argv in c. The remote
// user gets the metadata's remoteEnv, as `devcontainer exec` gives it.
func (c Container) ExecArgs(o ExecOptions, argv ...string) []string {
	args := []string{"exec"}
	if o.Stdin {
		args = append(args, "-i")
	}
	if o.TTY {
		args = append(args, "-t")
	}
	user := o.User
	var env []string
	if user == "" {
		user = c.RemoteUser
		env = c.RemoteEnv
		if o.Workdir == "" {
			o.Workdir = c.WorkspaceFolder
		}
	}
	args = append(args, "-u", user)
	if o.Workdir != "" {
		args = append(args, "-w", o.Workdir)
	}
	for _, kv := range append(env, o.Env...) {
		args = append(args, "-e", kv)
	}
	args = append(args, c.ID)
	return append(args, argv...)
}

// Attach runs argv in c with the given streams and returns its exit status
// (the engine's own failures included: 125–127).
func Attach(ctx context.Context, docker string, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, docker, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", docker, err)
	}
	return 0, nil
}

// CheckSecret returns an error unless the workspace's policy p names the
// secret name in its credentials section: a value stored under another
// name would never be used, and a typo would go unnoticed.
func CheckSecret(p *policy.Policy, name string) error {
	names := p.Credentials.Secrets()
	for _, n := range names {
		if n == name {
			return nil
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("secret %q is not in the policy: %s has no credentials section, so the credential gateway injects nothing (docs/credentials.md)", name, p.Path)
	}
	return fmt.Errorf("secret %q is not in the policy: %s names %s (its credentials section)", name, p.Path, strings.Join(names, ", "))
}
