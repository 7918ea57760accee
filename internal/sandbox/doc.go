// Package sandbox is devbox's second fence: it confines one command with
// bubblewrap (bwrap) so that a poisoned dependency or a prompt-injected
// command cannot read credentials or plant code that runs later. It builds
// the bwrap command line from the policy's sandbox section (Plan, then Args,
// which is pure), probes what the kernel and the container allow (Probe), runs
// the command with its exit status and signals passed through (Run), and
// generates the two companions of the layer: the seccomp profile a container
// needs before bwrap can work inside it (SeccompProfile) and Claude Code's
// managed settings, which turn on Claude Code's own sandbox with the same
// lists (ClaudeManagedSettings).
package sandbox
