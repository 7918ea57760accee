package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/firewall"
	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/entrypoint"
	"github.com/devbox-dev/devbox/internal/fence"
	"github.com/devbox-dev/devbox/internal/gateway"
	"github.com/devbox-dev/devbox/internal/isolated"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/secrets"
)

// verifyRefusedName is the name the entrypoint's self-test expects the DNS
// filter to refuse. .invalid is reserved (RFC 6761), so no policy allows it
// and the filter answers without ever forwarding it.
const verifyRefusedName = "fence-check.devbox.invalid"

var entrypointCommand = &cli.Command{
	Name:      "entrypoint",
	Usage:     "install the fence as root on container start, then run CMD as the policy's user",
	ArgsUsage: "[-- CMD [ARG...]]",
	Description: `Runs on every container start, as root: applies the policy baked into the
image with the firewall, starts the DNS filter under its own user, verifies
the fence and records the outcome in ` + entrypoint.StatusPath + `.

Without CMD (the Dev Containers CLI runs it from the image's
devcontainer.metadata "entrypoint") it returns once the fence is up. With
CMD (the image's ENTRYPOINT, so plain "docker run IMAGE" is fenced too) it
then drops to the policy's user — no capabilities, no_new_privs — and
execs CMD.

On any failure egress is left denied entirely, the reason is printed and
recorded, and the exit status is 1.

The self-test's probe targets come from --verify-* (or the DEVBOX_VERIFY_*
environment variables, comma-separated), so tests point them at their own
hosts; without them it checks the DNS filter answers and refuses a name.`,
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "policy", Value: layout.PolicyPath, Usage: "normalized policy `FILE` baked into the image"},
		&cli.StringFlag{Name: "baseline", Value: layout.BaselinePath, Usage: "team baseline `FILE` the applied policy must lie within (when it exists)"},
		&cli.StringFlag{Name: "repo-policy", Value: layout.RepoPolicyPath, Usage: "repository policy `FILE` mounted into a prebuilt image; applied instead of --policy when it exists and narrows the baseline"},
		&cli.StringFlag{Name: "status", Value: entrypoint.StatusPath, Usage: "`FILE` recording whether the fence is up"},
		&cli.StringFlag{Name: "applied-policy", Value: layout.AppliedPolicyPath, Usage: "`FILE` recording the policy the fence was resolved to, which devbox run, the gateway and devbox doctor read"},
		&cli.StringFlag{Name: "user", Usage: "run CMD as `NAME` (default: the policy's image.user.name)"},
		&cli.StringSliceFlag{Name: "verify-allowed", EnvVars: []string{"DEVBOX_VERIFY_ALLOWED"}, Usage: "`HOST:PORT` that must connect once fenced (repeatable)"},
		&cli.StringSliceFlag{Name: "verify-denied", EnvVars: []string{"DEVBOX_VERIFY_DENIED"}, Usage: "`HOST:PORT` that must not connect once fenced (repeatable)"},
		&cli.StringSliceFlag{Name: "verify-refused", EnvVars: []string{"DEVBOX_VERIFY_REFUSED"}, Usage: "`NAME` the DNS filter must refuse (repeatable; " + verifyRefusedName + " is always checked)"},
		&cli.BoolFlag{Name: "foreground", Usage: "once fenced, stay in the foreground checking the daemons (a Kubernetes pod's fence container); on a dead daemon deny all egress and exit 1"},
		&cli.StringFlag{Name: "secrets-from", Usage: "copy the secrets in `DIR` (a mounted Kubernetes Secret, one file per key) into the gateway's secrets directory first"},
		&cli.BoolFlag{Name: "fenced", Usage: "only report: exit 0 when the status says the fence is up for this container start, else 1 (a startup probe)"},
	},
	Action: runEntrypoint,
}

func runEntrypoint(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if c.Bool("fenced") {
		return reportFenced(c)
	}
	if os.Geteuid() != 0 {
		return errors.New("entrypoint: must run as root (the image's containerUser is root; the agent's user gets no say in the fence)")
	}
	if c.Bool("foreground") && len(argv) > 0 {
		return errors.New("entrypoint: --foreground runs no command: the agent runs in a container of its own")
	}
	policyPath := c.String("policy")
	statusPath := c.String("status")
	stderr := c.App.ErrWriter
	// A repository policy mounted into a prebuilt image is applied only
	// when it narrows the image's baseline; otherwise perr makes the fence
	// fail closed.
	r, perr := baseline.Resolve(policyPath, c.String("baseline"), c.String("repo-policy"))
	if from := c.String("secrets-from"); from != "" && perr == nil {
		// Secrets that cannot be handed to the gateway fail the fence
		// closed, like a policy that does not load.
		names, err := entrypoint.ImportSecrets(from, secrets.New(secrets.Dir()))
		if err != nil {
			perr = err
		} else {
			fmt.Fprintf(c.App.Writer, "devbox: secrets %v copied from %s for the credential gateway\n", names, from)
		}
	}
	appliedPath := c.String("applied-policy")
	if perr == nil {
		// Recorded before the fence is up, so nothing reads a stale one;
		// a failure to record fails closed like a policy that does not load.
		perr = baseline.WriteApplied(appliedPath, r.Policy)
	} else {
		os.Remove(appliedPath)
	}
	var cfg firewall.Config
	var gw *gateway.LaunchOptions
	userName := c.String("user")
	self, err := os.Executable()
	if err != nil {
		self = layout.BinaryPath
	}
	if perr == nil {
		p := r.Policy
		cfg = r.Fence()
		gw = gatewayLaunch(p.Credentials, self, appliedPath)
		if userName == "" {
			userName = p.Image.User.Name
		}
	}
	fc := fence.New(fence.Options{
		Config:  cfg,
		LoadErr: perr,
		Self:    self,
		Verify: &firewall.Targets{
			Allowed: splitList(c.StringSlice("verify-allowed")),
			Denied:  splitList(c.StringSlice("verify-denied")),
			Refused: append([]string{verifyRefusedName}, splitList(c.StringSlice("verify-refused"))...),
		},
		Gateway: gw,
		Warn:    stderr,
	})
	startID := entrypoint.StartID()
	switch st, ok := entrypoint.FencedThisStart(statusPath, startID); {
	case len(argv) == 0:
		if _, err := entrypoint.Run(c.Context, entrypoint.Options{
			Fence:      fc,
			StatusPath: statusPath,
			Policy:     policyPath,
			User:       userName,
			StartID:    startID,
			Stdout:     c.App.Writer,
			Stderr:     stderr,
			Start:      entrypoint.StartTime(),
		}); err != nil {
			// Already printed loudly by Run; the exit status is what remains.
			return cli.Exit("", 1)
		}
		handOver(userName, c.App.Writer, stderr)
		if c.Bool("foreground") {
			return superviseFence(c, fc, cfg, gw != nil && len(r.Policy.Credentials.Secrets()) > 0, statusPath)
		}
		return nil
	case ok:
		// The label's entrypoint already fenced this start (the Dev
		// Containers CLI then execs the image's ENTRYPOINT when
		// overrideCommand is false): only the privilege drop is left.
		fmt.Fprintf(c.App.Writer, "devbox: already fenced at %s during this container start\n", st.Time.Format(time.RFC3339))
	default:
		// Fence from a child process, so the DNS filter is not a child of CMD.
		if err := entrypoint.FenceInChild(c.Context, append([]string{self}, fenceArgs(c)...), c.App.Writer, stderr); err != nil {
			// Already printed; the exit status is what remains.
			return cli.Exit("", 1)
		}
	}
	if userName == "" {
		return errors.New("entrypoint: no user to run the command as: set image.user.name in the policy or pass --user")
	}
	acct, err := entrypoint.LookupAccount("/", userName)
	if err != nil {
		return fmt.Errorf("entrypoint: %w", err)
	}
	handOver(userName, c.App.Writer, stderr)
	return entrypoint.DropAndExec(acct, argv, os.Environ())
}

// handOver gives the agent's user, once the fence is up, the volumes that
// are its own: Claude Code's state directory (entrypoint.RepairClaudeState)
// and isolated mode's new, empty workspace volume, which it clones the
// checkout into (onCreateCommand). The account is looked up now, never
// assumed: the Dev Containers CLI may have remapped its uid. A failure is
// reported, not fatal: the fence is up, and what then fails says why.
func handOver(userName string, stdout, stderr io.Writer) {
	if userName == "" {
		return
	}
	acct, err := entrypoint.LookupAccount("/", userName)
	if err != nil {
		fmt.Fprintf(stderr, "devbox: entrypoint: %v; Claude Code's state and the workspace volume left as they are (the fence is up)\n", err)
		return
	}
	dir := entrypoint.ClaudeConfigDir(acct, os.Getenv(entrypoint.ClaudeConfigEnv))
	did, err := entrypoint.RepairClaudeState(acct, dir)
	for _, d := range did {
		fmt.Fprintf(stdout, "devbox: entrypoint: Claude Code's state: gave %s\n", d)
	}
	if err != nil {
		fmt.Fprintf(stderr, "devbox: entrypoint: Claude Code's state: %v (the fence is up; Claude Code may fail to save its login and settings)\n", err)
	}
	if ws := os.Getenv(layout.IsolatedWorkspaceEnv); ws != "" {
		if err := isolated.PrepareVolume(ws, acct.UID, acct.GID); err != nil {
			fmt.Fprintf(stderr, "devbox: entrypoint: isolated workspace %s: %v\n", ws, err)
		}
	}
}

// fenceArgs is this command's flags without CMD: the child that installs
// the fence.
func fenceArgs(c *cli.Context) []string {
	args := []string{"entrypoint", "--policy", c.String("policy"), "--baseline", c.String("baseline"), "--repo-policy", c.String("repo-policy"), "--status", c.String("status"), "--applied-policy", c.String("applied-policy")}
	if u := c.String("user"); u != "" {
		args = append(args, "--user", u)
	}
	for _, f := range []string{"verify-allowed", "verify-denied", "verify-refused"} {
		for _, v := range c.StringSlice(f) {
			args = append(args, "--"+f, v)
		}
	}
	return args
}

// splitList accepts both repeated flags and one comma-separated env value.
func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// superviseFence keeps the fence container's entrypoint running, checking
// the daemons every few seconds. When one is gone it fails closed: deny-all,
// the status says why, and the exit status makes the kubelet restart the
// fence (the agent's traffic is denied meanwhile).
func superviseFence(c *cli.Context, fc *fence.Fence, cfg firewall.Config, withGateway bool, statusPath string) error {
	check := func() error {
		errs := []error{firewall.CheckDNS(cfg)}
		if cfg.Gate {
			errs = append(errs, firewall.CheckGate(cfg))
		}
		if withGateway {
			errs = append(errs, gateway.Check(layout.RunDir))
		}
		return errors.Join(errs...)
	}
	err := entrypoint.Supervise(c.Context, 5*time.Second, check)
	if err == nil {
		return nil // stopped
	}
	derr := fc.DenyAll(context.WithoutCancel(c.Context))
	st, _ := entrypoint.ReadStatus(statusPath)
	st.State, st.Reason, st.Time = entrypoint.Failed, fmt.Sprintf("a fence daemon stopped: %v", errors.Join(err, derr)), time.Now()
	werr := entrypoint.WriteStatus(statusPath, st)
	fmt.Fprintf(c.App.ErrWriter, "devbox: entrypoint: %s; egress is denied\n", st.Reason)
	if werr != nil {
		fmt.Fprintf(c.App.ErrWriter, "devbox: entrypoint: %v\n", werr)
	}
	return cli.Exit("", 1)
}

// reportFenced is --fenced: the fence container's startup and liveness
// probe. It reads the status only, so any user may run it.
func reportFenced(c *cli.Context) error {
	if st, ok := entrypoint.FencedThisStart(c.String("status"), entrypoint.StartID()); ok {
		fmt.Fprintf(c.App.Writer, "devbox: fenced at %s\n", st.Time.Format(time.RFC3339))
		return nil
	}
	st, err := entrypoint.ReadStatus(c.String("status"))
	switch {
	case err != nil:
		fmt.Fprintf(c.App.ErrWriter, "devbox: not fenced: %v\n", err)
	case st.State == entrypoint.Fenced:
		fmt.Fprintln(c.App.ErrWriter, "devbox: not fenced: the status is from an earlier container start")
	default:
		fmt.Fprintf(c.App.ErrWriter, "devbox: not fenced: %s %s\n", st.State, st.Reason)
	}
	return cli.Exit("", 1)
}
