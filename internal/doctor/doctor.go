// Package doctor explains, inside or outside a devbox container, what the
// fence enforces, what it does not and why, with a fix the user can act on
// for every gap. Every probe of the system goes through System, so the
// checks are tested against fake /proc and /etc trees.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"text/tabwriter"
)

// Level grades a finding.
type Level string

const (
	// OK: enforced.
	OK Level = "ok"
	// Info: worth knowing, nothing to fix.
	Info Level = "info"
	// Warn: weaker than it should be.
	Warn Level = "warn"
	// Fail: not enforced.
	Fail Level = "fail"
)

// Finding is one line of the report.
type Finding struct {
	Check  string `json:"check"`
	Level  Level  `json:"level"`
	Detail string `json:"detail"`
	// Fix says what to do; empty for OK and Info.
	Fix string `json:"fix,omitempty"`
}

// Report is what `devbox doctor` prints.
type Report struct {
	Findings []Finding `json:"findings"`
	// Enforced is true when nothing failed.
	Enforced bool `json:"enforced"`
}

// System is everything the checks read. OS is the real one; tests pass a
// root directory of fake files and canned command results.
type System interface {
	ReadFile(path string) ([]byte, error)
	ReadDir(path string) ([]fs.DirEntry, error)
	Stat(path string) (fs.FileInfo, error)
	LookPath(name string) (string, error)
	// Run runs a command and returns its combined output.
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
	Geteuid() int
}

// OS is System on the running machine. Prefix is prepended to every path
// (empty in production; a temporary directory in tests that only fake
// files).
type OS struct{ Prefix string }

func (o OS) path(p string) string                    { return filepath.Join(o.Prefix, p) }
func (o OS) ReadFile(p string) ([]byte, error)       { return os.ReadFile(o.path(p)) }
func (o OS) ReadDir(p string) ([]fs.DirEntry, error) { return os.ReadDir(o.path(p)) }
func (o OS) Stat(p string) (fs.FileInfo, error)      { return os.Stat(o.path(p)) }
func (o OS) LookPath(name string) (string, error)    { return exec.LookPath(name) }
func (o OS) Geteuid() int                            { return os.Geteuid() }
func (o OS) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// Options say where to look.
type Options struct {
	// StatusPath is the entrypoint's status file.
	StatusPath string
	// PolicyPath is the policy baked into the image.
	PolicyPath string
	// Workspace is the repository in the container ("" skips the
	// read-only mount checks).
	Workspace string
	// DNSUID is the DNS filter's uid.
	DNSUID int
	// GateUID is the name gate's uid (0 skips the gate's check).
	GateUID int
	// GateHealth, when set, reads the gate's counters, summarized in a few
	// words, for the gate's line.
	GateHealth func(context.Context) (string, error)
	// Owns, when set, proves the daemon of a check ("dns filter", "name
	// gate", "credential gateway") serves from the sockets root made for
	// it (firewall.CheckDNS, firewall.CheckGate, gateway.Check); its error
	// names a port someone else took.
	Owns func(check string) error
	// Routes, when set (the policy has credentials), asks the credential
	// gateway for its routes; DialDirect tries a direct TCP connection to
	// a protected host's port 443 from this process, which must fail.
	Routes     func(context.Context) ([]Route, error)
	DialDirect func(ctx context.Context, host string) error
	// GitPaths lists the hooks directories and config files of every git
	// directory in a workspace and the files other tools run, relative to
	// it (gitaudit's ReadOnly); nil skips the check.
	GitPaths func(workspace string) ([]string, error)
	// IsolatedWorkspace is the workspace volume in isolated mode
	// (layout.IsolatedWorkspaceEnv); "" is the default, bind mode.
	IsolatedWorkspace string
}

// Route is one credential gateway route as doctor reports it.
type Route struct {
	Route, Host, Secret string
	SecretSet           bool
	// Upstream is "" when the gateway completed a verified TLS handshake
	// with the host, else why not.
	Upstream string
	// UpstreamSkipped is true when the gateway was asked not to try
	// (doctor --quiet); Upstream then says nothing.
	UpstreamSkipped bool
}

// Run performs every check.
func Run(ctx context.Context, sys System, o Options) Report {
	c := &checker{sys: sys, o: o}
	c.run(ctx)
	r := Report{Findings: c.out, Enforced: true}
	for _, f := range c.out {
		if f.Level == Fail {
			r.Enforced = false
		}
	}
	return r
}

// WriteText prints the report for a person.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", mark(f.Level), f.Check, f.Detail)
		if f.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", f.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	verdict := "the fence is enforced"
	if !r.Enforced {
		verdict = "the fence is NOT fully enforced: see the fixes above"
	}
	_, err := fmt.Fprintln(w, verdict)
	return err
}

// WriteProblems prints only what is not enforced or weaker than it should
// be, one line each with its fix, and nothing when all is well: the form a
// login banner shows.
func (r Report) WriteProblems(w io.Writer) error {
	for _, f := range r.Findings {
		if f.Level != Fail && f.Level != Warn {
			continue
		}
		if _, err := fmt.Fprintf(w, "devbox: %s %s: %s (fix: %s)\n", mark(f.Level), f.Check, f.Detail, f.Fix); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON prints the report as JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func mark(l Level) string {
	switch l {
	case OK:
		return "[ ok ]"
	case Info:
		return "[info]"
	case Warn:
		return "[warn]"
	default:
		return "[FAIL]"
	}
}
