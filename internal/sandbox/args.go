package sandbox

import "strconv"

// SandboxEnv is set to 1 inside every devbox sandbox, so that scripts (and
// `devbox run` itself) can tell they are confined.
const SandboxEnv = "DEVBOX_SANDBOX"

// Args returns bwrap's arguments for spec, without the bwrap program name.
// It is pure: same Spec, same arguments.
func Args(spec Spec) []string {
	a := []string{"--die-with-parent"}
	if spec.NewSession {
		a = append(a, "--new-session")
	}
	// Always a user namespace, also for root: without one, bwrap run by root
	// would keep root's capabilities' reach over mounts it did not make.
	a = append(a, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
	if spec.NoNetwork {
		a = append(a, "--unshare-net")
	}
	if spec.DisableUserns {
		a = append(a, "--disable-userns")
	}
	a = append(a, "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev")
	if spec.Proc {
		a = append(a, "--proc", "/proc")
	}
	for _, m := range spec.Mounts {
		switch m.Op {
		case Bind:
			a = append(a, "--bind", m.Path, m.Path)
		case ReadOnly:
			a = append(a, "--ro-bind", m.Path, m.Path)
		case HideDir:
			a = append(a, "--tmpfs", m.Path, "--remount-ro", m.Path)
		case HideFile:
			a = append(a, "--ro-bind", "/dev/null", m.Path)
		}
	}
	a = append(a, "--chdir", spec.Dir, "--setenv", SandboxEnv, "1")
	if spec.StatusFD > 0 {
		a = append(a, "--json-status-fd", strconv.Itoa(spec.StatusFD))
	}
	if spec.SeccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(spec.SeccompFD))
	}
	a = append(a, "--")
	return append(a, spec.Command...)
}
