package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/workspace"
)

// Flags of the commands that work on this repository's dev container from
// the host.
var (
	dockerPathFlag = &cli.StringFlag{
		Name:    "docker-path",
		EnvVars: []string{workspace.DockerPathEnv},
		Usage:   "the container engine's `CLI` (default: docker on the PATH, else podman)",
	}
	containerFlag = &cli.StringFlag{
		Name:  "container",
		Usage: "the dev container's `ID` or name (default: the one the Dev Containers CLI runs for the workspace folder)",
	}
	workspaceFolderFlag = &cli.StringFlag{
		Name:  "workspace-folder",
		Value: ".",
		Usage: "the repository's `DIR` on the host",
	}
	hostFlags = []cli.Flag{dockerPathFlag, containerFlag, workspaceFolderFlag}
)

// inContainer reports whether devbox runs inside a devbox container: the
// image bakes the normalized policy in at layout.PolicyPath, which a host
// never has.
func inContainer() bool {
	_, err := os.Stat(layout.PolicyPath)
	return err == nil
}

// engine returns the container engine's CLI the host flags name or
// workspace.Engine finds.
func engine(c *cli.Context) (string, error) {
	return workspace.Engine(c.String(dockerPathFlag.Name), exec.LookPath)
}

// hostOptions say which container a host command works on.
type hostOptions struct {
	docker, container, folder string
}

// find returns the engine and the running dev container of the workspace
// folder (or the container named).
func (o hostOptions) find(c *cli.Context) (string, workspace.Container, error) {
	docker, err := workspace.Engine(o.docker, exec.LookPath)
	if err != nil {
		return "", workspace.Container{}, err
	}
	ct, err := workspace.Find(c.Context, workspace.FindOptions{Folder: o.folder, Container: o.container, Docker: docker, Run: workspace.ExecRunner{}})
	return docker, ct, err
}

// findWorkspace is hostOptions.find with the host flags.
func findWorkspace(c *cli.Context) (string, workspace.Container, error) {
	return hostOptions{
		docker:    c.String(dockerPathFlag.Name),
		container: c.String(containerFlag.Name),
		folder:    c.String(workspaceFolderFlag.Name),
	}.find(c)
}

// workspacePolicy loads the workspace folder's policy (where devbox init
// writes it).
func workspacePolicy(c *cli.Context) (*policy.Policy, error) {
	path, err := policy.Find(c.String(workspaceFolderFlag.Name))
	if err != nil {
		return nil, fmt.Errorf("%w (run devbox up, or devbox init, in the repository)", err)
	}
	return policy.Load(path)
}

// inWorkspace runs args (the engine's exec arguments) with the given
// standard input and the app's output, and fails when the command does.
func inWorkspace(c *cli.Context, docker string, args []string, stdin io.Reader) error {
	code, err := workspace.Attach(c.Context, docker, args, stdin, c.App.Writer, c.App.ErrWriter)
	if err != nil {
		return err
	}
	if code != 0 {
		return cli.Exit("", code)
	}
	return nil
}
