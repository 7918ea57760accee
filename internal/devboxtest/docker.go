package devboxtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Docker is the CLI of the test dockerd that scripts/test starts: Path is
// the docker binary (DEVBOX_DOCKER_PATH), Host its daemon (DEVBOX_DOCKER_HOST,
// a unix:// address). It never talks to the system's default daemon.
type Docker struct {
	Path string
	Host string
}

// DockerCLI gates tb on DEVBOX_E2E and returns the test dockerd's CLI,
// failing when scripts/test's variables are missing.
func DockerCLI(tb testing.TB) Docker {
	tb.Helper()
	return Docker{Path: Env(tb, "DEVBOX_DOCKER_PATH"), Host: Env(tb, "DEVBOX_DOCKER_HOST")}
}

// Env returns the environment a docker command needs: the current one with
// DOCKER_HOST pointing at the test daemon (DOCKER_CONFIG, with the test
// registry's credentials, is inherited from scripts/test).
func (d Docker) Env() []string {
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DOCKER_HOST=") {
			env = append(env, kv)
		}
	}
	return append(env, "DOCKER_HOST="+d.Host)
}

// Command returns `docker args…` aimed at the test daemon.
func (d Docker) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, d.Path, args...)
	cmd.Env = d.Env()
	return cmd
}

// Run runs `docker args…` and returns its trimmed standard output, failing
// tb with the command's output when it fails.
func (d Docker) Run(tb testing.TB, args ...string) string {
	tb.Helper()
	cmd := d.Command(context.Background(), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
