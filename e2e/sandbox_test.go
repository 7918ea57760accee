package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/layout"
)

// sandboxRepo is sampleRepo with sandbox.enabled in the policy: `devbox
// init` must write devbox's seccomp profile and reference it from runArgs.
// patchConfig merges the world's runArgs into init's, so the profile's
// option stays exactly as init wrote it.
func sandboxRepo(t *testing.T, e env, w *world) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	os.MkdirAll(filepath.Join(dir, ".devcontainer"), 0o755)
	run(t, dir, nil, "git", "init", "-q", ".")
	pol := strings.Replace(policyFor(e, w, e.registry+"/devbox/e2e:unused"), `"agent":`, `"sandbox": {"enabled": true},
  "agent":`, 1)
	os.WriteFile(filepath.Join(dir, devcontainer.PolicyFile), []byte(pol), 0o644)
	run(t, dir, nil, e.devbox, "lock", devcontainer.PolicyFile)
	run(t, dir, nil, e.devbox, "init")
	cfgPath := filepath.Join(dir, devcontainer.ConfigFile)
	raw, _ := os.ReadFile(cfgPath)
	if !strings.Contains(string(raw), devcontainer.SeccompRunArg) {
		t.Fatalf("devbox init with sandbox.enabled did not add %s to runArgs:\n%s", devcontainer.SeccompRunArg, raw)
	}
	if _, err := os.Stat(filepath.Join(dir, devcontainer.SeccompFile)); err != nil {
		t.Fatalf("devbox init with sandbox.enabled: %v", err)
	}
	patchConfig(t, cfgPath, w, true)
	raw, _ = os.ReadFile(cfgPath)
	if !strings.Contains(string(raw), devcontainer.SeccompRunArg) {
		t.Fatalf("patchConfig dropped init's %s from runArgs:\n%s", devcontainer.SeccompRunArg, raw)
	}
	run(t, dir, nil, e.devbox, "init") // as in sampleRepo: nothing left for the start's init to rewrite
	run(t, dir, nil, "chown", "-R", "1000:1000", ".")
	return dir
}

var e2eCaseRE = regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (TestE2E\w+)`)

// TestSandboxInContainer: a devbox container with sandbox.enabled, started
// by `devcontainer up` from what `devbox init` wrote (its seccomp profile
// in runArgs), runs `devbox run` as the non-root remote user, and passes the
// same real-bwrap cases as internal/sandbox (its test binary, run inside
// with DEVBOX_SANDBOX_INSIDE=1). The same image under Docker's default
// seccomp profile makes `devbox run` refuse and name the fix.
func TestSandboxInContainer(t *testing.T) {
	e := setup(t)
	w := startWorld(t, e.d, e.base, e.worldd)
	repo := sandboxRepo(t, e, w)
	id := devcontainerUp(t, e, repo)
	requireFenced(t, e.d, id, "")
	dexec := devcontainerExec(e, repo, "DOCKER_HOST="+e.d.Host)

	secOpt := e.d.Run(t, "inspect", "--format", "{{json .HostConfig.SecurityOpt}}", id)
	if !strings.Contains(secOpt, "seccomp=") || strings.Contains(secOpt, "seccomp=unconfined") || !strings.Contains(secOpt, "no-new-privileges") {
		t.Errorf("container security options %s: want devbox's seccomp profile and no-new-privileges", tail(secOpt))
	}

	t.Run("devbox run as the remote user", func(t *testing.T) {
		out, err := dexec("devbox", "run", "--", "sh", "-c", "echo uid=$(id -u) sandbox=$DEVBOX_SANDBOX; exit 3").CombinedOutput()
		t.Logf("devbox run in the container:\n%s", out)
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
			t.Errorf("devbox run -- … exit 3: %v, want exit status 3", err)
		}
		if !strings.Contains(string(out), "uid=1000 sandbox=1") {
			t.Errorf("the command did not run sandboxed as uid 1000:\n%s", out)
		}
		// Docker masks /proc paths, so the full sandbox (a new /proc) may
		// fail: then the weaker mode must be said, never silent.
		if strings.Contains(string(out), "WEAKER SANDBOX") {
			t.Logf("inside Docker devbox run uses the documented weaker mode")
		}
	})

	t.Run("run-end audit reports a plant", func(t *testing.T) {
		out, err := dexec("sh", "-c", "devbox run -- sh -c 'mkdir -p deep && echo evil > deep/.envrc'").CombinedOutput()
		if err == nil || !regexp.MustCompile(`AUDIT: new +runlater +deep/\.envrc `).Match(out) {
			t.Errorf("devbox run planting deep/.envrc: %v, want a failure and its audit line:\n%s", err, out)
		}
	})

	t.Run("same cases as internal/sandbox", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "devbox-sandbox.test")
		cmd := exec.Command("go", "test", "-c", "-o", bin, "./internal/sandbox")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go test -c ./internal/sandbox: %v\n%s", err, b)
		}
		e.d.Run(t, "cp", bin, id+":/usr/local/bin/devbox-sandbox.test")
		out, err := dexec("env", "DEVBOX_E2E=1", "DEVBOX_SANDBOX_INSIDE=1",
			"devbox-sandbox.test", "-test.run", "^TestE2E", "-test.v", "-test.count=1").CombinedOutput()
		t.Logf("internal/sandbox's real-bwrap cases inside the container:\n%s", tail(string(out)))
		if err != nil {
			t.Errorf("the cases failed inside the container: %v", err)
		}
		seen := map[string]string{}
		for _, m := range e2eCaseRE.FindAllStringSubmatch(string(out), -1) {
			seen[m[2]] = m[1]
		}
		for _, name := range []string{"TestE2EDenyRead", "TestE2EMandatoryDenyWrite", "TestE2EWritablePaths",
			"TestE2ENoNetwork", "TestE2EExitStatus", "TestE2ESignalForwarded", "TestE2ETerminal",
			"TestE2ERunEndAudit", "TestE2EKilledRunAudited", "TestE2ECacheRunLater",
			"TestE2ENoUserNamespace", "TestE2EOrdinaryPrograms"} {
			if seen[name] != "PASS" {
				t.Errorf("%s inside the container: %q, want PASS", name, seen[name])
			}
		}
	})

	t.Run("default seccomp profile refuses", func(t *testing.T) {
		image := strings.TrimSpace(e.d.Run(t, "inspect", "--format", "{{.Image}}", id))
		out, err := e.d.Command(context.Background(), "run", "--rm", "--network", "none", "--user", "dev",
			"--entrypoint", layout.BinaryPath, image, "run", "--", "echo", "RAN").CombinedOutput()
		t.Logf("under Docker's default seccomp profile:\n%s", out)
		if err == nil || strings.Contains(string(out), "RAN") {
			t.Errorf("devbox run under Docker's default seccomp profile ran the command (err %v)", err)
		}
		for _, want := range []string{"bubblewrap cannot create a sandbox here", "devbox run --print-seccomp", "--security-opt seccomp=", "rerun `devbox init`"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("the refusal does not say %q", want)
			}
		}
	})
}
