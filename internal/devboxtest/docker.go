package devboxtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"sort"
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

// ForgetDevcontainer removes, when tb ends, what the Dev Containers CLI
// leaves in the engine for the workspace folder repo: its containers
// (labelled devcontainer.local_folder) and the images it built for it,
// named vsc-<folder's base name>-<sha256 of the folder's path> (plus
// -uid and -features). Each is a few hundred MB, and an e2e run makes
// dozens: left behind, they filled CI's disk.
func (d Docker) ForgetDevcontainer(tb testing.TB, repo string) {
	sum := sha256.Sum256([]byte(repo))
	hash := hex.EncodeToString(sum[:])
	tb.Cleanup(func() {
		ctx := context.Background()
		out, _ := d.Command(ctx, "ps", "-aq", "--filter", "label=devcontainer.local_folder="+repo).Output()
		if ids := strings.Fields(string(out)); len(ids) > 0 {
			d.Command(ctx, append([]string{"rm", "-f", "-v"}, ids...)...).Run()
		}
		out, _ = d.Command(ctx, "images", "--format", "{{.Repository}}:{{.Tag}}").Output()
		var names []string
		for _, ref := range strings.Fields(string(out)) {
			if strings.HasPrefix(ref, "vsc-") && strings.Contains(ref, "-"+hash) {
				names = append(names, ref)
			}
		}
		if len(names) > 0 {
			// The -uid and -features images are built on the plain
			// one: the longer names go first.
			sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
			d.Command(ctx, append([]string{"rmi", "-f"}, names...)...).Run()
		}
	})
}
