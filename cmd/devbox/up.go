package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/devbox-dev/devbox/internal/entrypoint"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/workspace"
)

// devcontainerCLIFlag names the Dev Containers CLI.
var devcontainerCLIFlag = &cli.StringFlag{
	Name:    "devcontainer-cli",
	Value:   "devcontainer",
	EnvVars: []string{"DEVBOX_DEVCONTAINER_CLI"},
	Usage:   "the Dev Containers CLI's `PATH`",
}

// installDevcontainerCLI says how to get the Dev Containers CLI.
const installDevcontainerCLI = "install it with `npm install -g @devcontainers/cli` (Node.js 20 or later), or open the repository in VS Code with the Dev Containers extension (Reopen in Container)"

var upCommand = &cli.Command{
	Name:  "up",
	Usage: "on the host: set the repository up (devbox init --lock) and start its dev container, or reuse the running one",
	Description: `devbox up does what VS Code's "Reopen in Container" does, from a terminal:

  1. devbox audit (when the repository is set up): stops when something the
     container planted for host git needs a review (docs/git.md);
  2. devbox init --lock: writes or refreshes .devcontainer/ (the policy, the
     lock, devcontainer.json, the Dockerfile);
  3. devcontainer up --workspace-folder DIR (the Dev Containers CLI, with
     --docker-path for Podman): builds the image when needed, then starts the
     container or reuses the running one. Its initializeCommand runs the same
     audit and init again, which then change nothing.

Then it prints how to attach: devbox claude, devbox shell, devbox login.`,
	Flags: []cli.Flag{
		dockerPathFlag, workspaceFolderFlag, devcontainerCLIFlag,
		&cli.BoolFlag{Name: "rebuild", Usage: "remove the running container and create it again (devcontainer up --remove-existing-container); the volumes (Claude Code's state, the secrets) stay"},
	},
	Action: func(c *cli.Context) error {
		if c.NArg() != 0 {
			return errors.New("up: no arguments (the repository is --workspace-folder, default .)")
		}
		if inContainer() {
			return errors.New("up: run devbox up on the host, in the repository: this is already a devbox container")
		}
		start := time.Now()
		dir, err := filepath.Abs(c.String(workspaceFolderFlag.Name))
		if err != nil {
			return err
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("up: %s is not a directory", dir)
		}
		dcli, err := exec.LookPath(c.String(devcontainerCLIFlag.Name))
		if err != nil {
			return fmt.Errorf("up: the Dev Containers CLI (%s) is not found: %s", c.String(devcontainerCLIFlag.Name), installDevcontainerCLI)
		}
		docker, err := engine(c)
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		// What the initializeCommand runs, first here, so its errors come
		// before the CLI's log.
		if _, err := policy.Find(dir); err == nil {
			if err := c.App.RunContext(c.Context, []string{c.App.Name, "audit", dir}); err != nil {
				return fmt.Errorf("up: %w", err)
			}
		}
		if err := c.App.RunContext(c.Context, []string{c.App.Name, "init", "--lock", "--no-next", dir}); err != nil {
			return fmt.Errorf("up: %w", err)
		}
		args := []string{"up", "--workspace-folder", dir, "--docker-path", docker}
		if c.Bool("rebuild") {
			args = append(args, "--remove-existing-container")
		}
		fmt.Fprintf(c.App.ErrWriter, "devbox: %s %s\n", filepath.Base(dcli), strings.Join(args, " "))
		res, err := devcontainerUp(c, dcli, args)
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		ct, err := workspace.Find(c.Context, workspace.FindOptions{Folder: dir, Container: res.ContainerID, Docker: docker, Run: workspace.ExecRunner{}})
		if err != nil {
			return fmt.Errorf("up: %w", err)
		}
		fence := fenceState(c, docker, ct)
		w := c.App.Writer
		fmt.Fprintf(w, "devbox: %s is up for %s (%s, %.1f s); fence: %s\n", ct.Name, dir, res.Outcome, time.Since(start).Seconds(), fence)
		fmt.Fprintf(w, "attach, from %s:\n", dir)
		fmt.Fprintf(w, "  devbox login     store your Claude credential in the container (once; the agent cannot read it)\n")
		fmt.Fprintf(w, "  devbox claude    Claude Code as %s in %s\n", ct.RemoteUser, ct.WorkspaceFolder)
		fmt.Fprintf(w, "  devbox shell     a shell there\n")
		fmt.Fprintf(w, "  or VS Code: Dev Containers: Attach to Running Container (%s)\n", ct.Name)
		return nil
	},
}

// upResult is the JSON line `devcontainer up` ends its standard output with.
type upResult struct {
	Outcome     string `json:"outcome"`
	ContainerID string `json:"containerId"`
	Message     string `json:"message"`
	Description string `json:"description"`
}

// devcontainerUp runs the Dev Containers CLI's up with its log on the
// app's error output, and returns its result.
func devcontainerUp(c *cli.Context, dcli string, args []string) (upResult, error) {
	cmd := exec.CommandContext(c.Context, dcli, args...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, c.App.ErrWriter
	runErr := cmd.Run()
	var res upResult
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil && runErr == nil {
		return res, fmt.Errorf("devcontainer up printed no result: %q", stdout.String())
	}
	if runErr != nil || res.Outcome != "success" {
		msg := strings.TrimSpace(res.Message + " " + res.Description)
		if msg == "" && runErr != nil {
			msg = runErr.Error()
		}
		return res, fmt.Errorf("devcontainer up failed (log above): %s", msg)
	}
	return res, nil
}

// fenceState reads the fence's status in ct, waiting a little while the
// entrypoint is still starting.
func fenceState(c *cli.Context, docker string, ct workspace.Container) string {
	var st entrypoint.Status
	for i := 0; i < 50; i++ {
		out, err := workspace.ExecRunner{}.Output(c.Context, nil, docker, ct.ExecArgs(workspace.ExecOptions{User: "root"}, "cat", entrypoint.StatusPath)...)
		if err != nil || json.Unmarshal(out, &st) != nil {
			return "unknown (no " + entrypoint.StatusPath + "): is this a devbox image?"
		}
		if st.State != entrypoint.Starting {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Reason != "" {
		return string(st.State) + ": " + st.Reason
	}
	return string(st.State)
}

// attachArgs splits the arguments of devbox claude and devbox shell: the
// host options first (--container ID, --docker-path CLI,
// --workspace-folder DIR, each also as --opt=value), an optional "--",
// then the command's own arguments, which devbox never parses.
func attachArgs(args []string) (hostOptions, []string, error) {
	o := hostOptions{folder: "."}
	for len(args) > 0 {
		a := args[0]
		if a == "--" {
			return o, args[1:], nil
		}
		name, val, hasVal := strings.Cut(a, "=")
		var dst *string
		switch name {
		case "--container":
			dst = &o.container
		case "--docker-path":
			dst = &o.docker
		case "--workspace-folder":
			dst = &o.folder
		default:
			return o, args, nil
		}
		if !hasVal {
			if len(args) < 2 {
				return o, nil, fmt.Errorf("%s needs a value", name)
			}
			val, args = args[1], args[1:]
		}
		*dst = val
		args = args[1:]
	}
	return o, args, nil
}

// attach runs argv in the workspace's container as the remote user, in
// the workspace folder, with this terminal: -t when standard input and
// output are terminals (the engine's CLI then passes the window size and
// its changes). The command's exit status is devbox's.
func attach(c *cli.Context, argv []string, what string) error {
	if inContainer() {
		return fmt.Errorf("%s: run it on the host: this is already a devbox container", what)
	}
	o, rest, err := attachArgs(c.Args().Slice())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if o.docker == "" {
		o.docker = os.Getenv(workspace.DockerPathEnv)
	}
	docker, ct, err := o.find(c)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	tty := isTerminal(os.Stdin) && isTerminal(os.Stdout)
	args := ct.ExecArgs(workspace.ExecOptions{Stdin: true, TTY: tty}, append(argv, rest...)...)
	return inWorkspace(c, docker, args, appReader(c))
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// loginShell starts the remote user's login shell (from passwd).
const loginShell = `s=$(getent passwd "$(id -un)" | cut -d: -f7); exec "${s:-/bin/sh}" -l`

var claudeCommand = &cli.Command{
	Name:      "claude",
	Usage:     "on the host: run Claude Code in the workspace's dev container, as its remote user, with this terminal",
	ArgsUsage: "[--container ID] [--docker-path CLI] [--workspace-folder DIR] [--] [CLAUDE ARGS]",
	Description: `Runs "claude ARGS" in the running dev container of this repository (devbox up
starts it) as the remote user, in the workspace folder: the same as an
editor's terminal there. Every argument after devbox's own options goes to
Claude Code unchanged; its exit status is devbox's.`,
	SkipFlagParsing: true,
	Action: func(c *cli.Context) error {
		return attach(c, []string{"claude"}, "claude")
	},
}

var shellCommand = &cli.Command{
	Name:      "shell",
	Usage:     "on the host: open a shell (or run COMMAND) in the workspace's dev container, as its remote user",
	ArgsUsage: "[--container ID] [--docker-path CLI] [--workspace-folder DIR] [--] [COMMAND ARGS]",
	Description: `Opens the remote user's login shell in the running dev container of this
repository, in the workspace folder; with COMMAND, runs it instead. The exit
status is the shell's (or the command's).`,
	SkipFlagParsing: true,
	Action: func(c *cli.Context) error {
		if _, rest, err := attachArgs(c.Args().Slice()); err == nil && len(rest) > 0 {
			return attach(c, nil, "shell")
		}
		return attach(c, []string{"sh", "-c", loginShell}, "shell")
	},
}
