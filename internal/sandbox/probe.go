package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ProbeResult is what the environment allows.
type ProbeResult struct {
	// Weaker is true when only the documented fallback works: no new /proc
	// (the command sees the container's processes in /proc) and no bwrap
	// --disable-userns (devbox's seccomp filter still refuses nested user
	// namespaces). Reason says why the full sandbox failed.
	Weaker bool
	Reason string
}

// ErrUnavailable is returned by Probe when bubblewrap cannot create the
// namespaces devbox needs. devbox never runs a command unconfined instead.
var ErrUnavailable = errors.New("bubblewrap cannot create a sandbox here")

// Probe runs a trivial command in the full sandbox, then in the weaker one,
// and reports which works. It never silently accepts less: the caller must
// print Reason when Weaker is set.
func Probe(ctx context.Context, bwrap string) (ProbeResult, error) {
	if _, err := exec.LookPath(bwrap); err != nil {
		return ProbeResult{}, fmt.Errorf("%w: %s not found (install the bubblewrap package: apt-get install bubblewrap): %v", ErrUnavailable, bwrap, err)
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return ProbeResult{}, fmt.Errorf("sandbox: probe needs true(1): %w", err)
	}
	try := func(weaker bool) (string, error) {
		spec := Spec{Dir: "/", Proc: !weaker, DisableUserns: !weaker, NewSession: true, Command: []string{truePath}}
		cmd := exec.CommandContext(ctx, bwrap, Args(spec)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		return strings.TrimSpace(stderr.String()), err
	}
	msg, err := try(false)
	if err == nil {
		return ProbeResult{}, nil
	}
	full := msg
	if full == "" {
		full = err.Error()
	}
	msg, err = try(true)
	if err == nil {
		return ProbeResult{Weaker: true, Reason: full}, nil
	}
	if msg == "" {
		msg = err.Error()
	}
	return ProbeResult{}, fmt.Errorf("%w (bwrap: %s).\n"+
		"Inside a container, Docker's default seccomp profile forbids the namespaces bubblewrap needs: "+
		"start the container with the profile devbox ships (devbox run --print-seccomp > devbox-seccomp.json, "+
		"then --security-opt seccomp=devbox-seccomp.json; in a dev container, set sandbox.enabled in the policy and rerun `devbox init`, "+
		"which writes .devcontainer/devbox-seccomp.json and adds it to runArgs; see docs/sandbox.md). "+
		"On a host, check that user namespaces are allowed (sysctl user.max_user_namespaces, "+
		"kernel.unprivileged_userns_clone, AppArmor's kernel.apparmor_restrict_unprivileged_userns)",
		ErrUnavailable, msg)
}
