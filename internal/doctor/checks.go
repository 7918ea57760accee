package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/devbox-dev/devbox/internal/layout"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/entrypoint"
)

type checker struct {
	sys System
	o   Options
	out []Finding
}

func (c *checker) add(check string, l Level, fix string, format string, args ...any) {
	c.out = append(c.out, Finding{Check: check, Level: l, Detail: fmt.Sprintf(format, args...), Fix: fix})
}

func (c *checker) run(ctx context.Context) {
	if !c.inContainer() {
		c.add("container", Fail, "run `devbox doctor` inside the dev container (`devcontainer exec --workspace-folder . devbox doctor`, or `docker exec CONTAINER devbox doctor`)",
			"not in a container: nothing here is fenced by devbox")
		c.bwrap(ctx, false)
		return
	}
	c.add("container", OK, "", "running in a container")
	c.status()
	c.dnsFilter()
	c.gate(ctx)
	c.credentials(ctx)
	c.identity()
	c.containerCaps()
	c.rules(ctx)
	c.ipv6()
	c.privilegeTools()
	c.mounts()
	c.policy(ctx)
}

func (c *checker) inContainer() bool {
	for _, p := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := c.sys.Stat(p); err == nil {
			return true
		}
	}
	b, _ := c.sys.ReadFile("/proc/1/cgroup")
	for _, w := range []string{"docker", "containerd", "kubepods", "libpod"} {
		if strings.Contains(string(b), w) {
			return true
		}
	}
	return false
}

func (c *checker) status() {
	b, err := c.sys.ReadFile(c.o.StatusPath)
	if errors.Is(err, fs.ErrNotExist) {
		c.add("fence", Fail, "start the container so its entrypoint runs as root: the devbox image's devcontainer.metadata label does this for the Dev Containers CLI, and its ENTRYPOINT for `docker run`; an image or devcontainer.json that overrides either skips the fence",
			"the devbox entrypoint has not run in this container (%s missing)", c.o.StatusPath)
		return
	}
	if err != nil {
		c.add("fence", Fail, "", "cannot read %s: %v", c.o.StatusPath, err)
		return
	}
	var st entrypoint.Status
	if err := json.Unmarshal(b, &st); err != nil {
		c.add("fence", Fail, "restart the container to rewrite it", "%s is not a devbox status: %v", c.o.StatusPath, err)
		return
	}
	at := st.Time.Format(time.RFC3339)
	switch st.State {
	case entrypoint.Fenced:
		c.add("fence", OK, "", "fenced and verified at %s (entrypoint took %.1f ms)", at, st.ElapsedMS)
	case entrypoint.Failed:
		c.add("fence", Fail, "fix the cause and restart the container; until then all egress is denied",
			"the entrypoint FAILED at %s and left egress denied entirely: %s", at, st.Reason)
	default:
		c.add("fence", Fail, "restart the container; if it happens again, read the container log (`docker logs`)",
			"the entrypoint started at %s and never finished (state %q): it crashed or is still running", at, st.State)
	}
}

// procs lists the pids whose real uid is uid.
func (c *checker) procs(uid int) []int {
	ents, err := c.sys.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := c.sys.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		ps, err := entrypoint.ParseProcStatus(string(b))
		// A zombie is a process that died and was not reaped: it serves
		// nothing.
		if err == nil && ps.UID[0] == uid && !ps.Zombie() {
			pids = append(pids, pid)
		}
	}
	return pids
}

func (c *checker) dnsFilter() {
	pids := c.procs(c.o.DNSUID)
	if len(pids) == 0 {
		c.add("dns filter", Fail, "restart the container: the entrypoint starts the filter again",
			"the DNS filter (uid %d) is not running: no name resolves, so egress by name is denied (fail closed, not open)%s", c.o.DNSUID, c.record("dns filter"))
		return
	}
	if c.owns("dns filter") {
		c.add("dns filter", OK, "", "running as uid %d (pid %v); all DNS is redirected to it", c.o.DNSUID, pids)
	}
}

// record is what Owns says of a daemon found not running ("" without
// Owns): its record's view, with any port another owner took since.
func (c *checker) record(check string) string {
	if c.o.Owns == nil {
		return ""
	}
	if err := c.o.Owns(check); err != nil {
		return "; " + err.Error()
	}
	return ""
}

// owns reports whether the daemon of check serves from its own sockets,
// adding a failure when it does not: a process that answers on its port
// in its place is not it.
func (c *checker) owns(check string) bool {
	if c.o.Owns == nil {
		return true
	}
	if err := c.o.Owns(check); err != nil {
		c.add(check, Fail, "restart the container: the entrypoint makes the daemon's sockets again, and fails closed while another process holds its port",
			"not proven to serve from its own sockets: %v", err)
		return false
	}
	return true
}

// gate checks the name gate: without it TCP to allowed names' addresses
// is refused (closed, not open), static entries still pass.
func (c *checker) gate(ctx context.Context) {
	if c.o.GateUID == 0 {
		return
	}
	pids := c.procs(c.o.GateUID)
	if len(pids) == 0 {
		c.add("name gate", Fail, "restart the container: the entrypoint starts the gate again",
			"the name gate (uid %d) is not running: TCP to allowed names is refused (fail closed, not open); static IP entries still pass%s", c.o.GateUID, c.record("name gate"))
		return
	}
	detail := fmt.Sprintf("running as uid %d (pid %v); TCP to allowed names must carry an allowed TLS SNI or HTTP Host", c.o.GateUID, pids)
	if c.o.GateHealth != nil {
		h, err := c.o.GateHealth(ctx)
		if err != nil {
			c.add("name gate", Fail, "restart the container: the entrypoint starts the gate again", "%s, but it does not answer: %v", detail, err)
			return
		}
		detail += "; " + h
	}
	if c.owns("name gate") {
		c.add("name gate", OK, "", "%s", detail)
	}
}

func (c *checker) self() (entrypoint.ProcStatus, bool) {
	b, err := c.sys.ReadFile("/proc/self/status")
	if err != nil {
		c.add("privileges", Fail, "", "cannot read /proc/self/status: %v", err)
		return entrypoint.ProcStatus{}, false
	}
	ps, err := entrypoint.ParseProcStatus(string(b))
	if err != nil {
		c.add("privileges", Fail, "", "%v", err)
		return ps, false
	}
	return ps, true
}

func (c *checker) identity() {
	ps, ok := c.self()
	if !ok {
		return
	}
	if c.sys.Geteuid() == 0 || ps.UID[1] == 0 {
		c.add("user", Warn, "run the agent as the remote user: `devcontainer exec` does by default, `docker exec -u USER` otherwise",
			"running as root: root can change the fence; the checks below describe root, not the agent's user")
		return
	}
	c.add("user", OK, "", "running as uid %d, not root", ps.UID[0])
	if m := ps.CapEff | ps.CapPrm | ps.CapInh | ps.CapAmb; m != 0 {
		c.add("capabilities", Fail, "give capabilities to the container (capAdd), never to the user: only the root entrypoint needs NET_ADMIN and NET_RAW; drop any ambient or file capabilities",
			"this process holds %s: it may be able to change the fence", entrypoint.CapNames(m))
	} else {
		c.add("capabilities", OK, "", "no capability in any set (effective, permitted, inheritable, ambient)")
	}
	if !ps.NoNewPrivs {
		c.add("no_new_privs", Fail, "run the container with securityOpt no-new-privileges (devbox's image label sets it; for `docker run` add --security-opt no-new-privileges, or let the image ENTRYPOINT exec your command)",
			"no_new_privs is off: a setuid or file-capability binary could raise this process's privileges")
	} else {
		c.add("no_new_privs", OK, "", "no_new_privs is on: setuid and file capabilities are ignored")
	}
}

func (c *checker) containerCaps() {
	b, err := c.sys.ReadFile("/proc/1/status")
	if err != nil {
		c.add("container capabilities", Warn, "", "cannot read /proc/1/status: %v", err)
		return
	}
	ps, err := entrypoint.ParseProcStatus(string(b))
	if err != nil {
		c.add("container capabilities", Warn, "", "/proc/1/status: %v", err)
		return
	}
	var missing []string
	for _, cp := range []int{entrypoint.CapNetAdmin, entrypoint.CapNetRaw} {
		if !entrypoint.Has(ps.CapBnd, cp) {
			missing = append(missing, entrypoint.CapNames(1<<uint(cp)))
		}
	}
	if len(missing) > 0 {
		// In a pod (Kubernetes, podman kube play) pid 1 is the pause
		// process, and the fence is installed by a container of its own
		// (docs/kubernetes.md): the DNS filter holding CAP_NET_ADMIN shows
		// that container had it.
		for _, pid := range c.procs(c.o.DNSUID) {
			b, err := c.sys.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			if ds, err := entrypoint.ParseProcStatus(string(b)); err == nil && entrypoint.Has(ds.CapEff, entrypoint.CapNetAdmin) {
				c.add("container capabilities", OK, "", "this container lacks %s, as it should in a pod: the fence's own container installed the firewall (its DNS filter, pid %d, holds CAP_NET_ADMIN)", strings.Join(missing, ", "), pid)
				return
			}
		}
		c.add("container capabilities", Fail, "add capAdd [\"NET_ADMIN\", \"NET_RAW\"] (devbox's image label carries it; for `docker run` pass --cap-add NET_ADMIN --cap-add NET_RAW)",
			"the container lacks %s: the entrypoint cannot install the firewall", strings.Join(missing, ", "))
		return
	}
	c.add("container capabilities", OK, "", "the container has CAP_NET_ADMIN and CAP_NET_RAW for the root entrypoint")
}

func (c *checker) rules(ctx context.Context) {
	if c.sys.Geteuid() != 0 {
		c.add("rules", Info, "", "only root can read the rules; the entrypoint verified them (see \"fence\"); `sudo` is deliberately absent, so run `docker exec -u root CONTAINER devbox doctor` from the host to inspect them")
		return
	}
	for _, fam := range []string{"iptables", "ip6tables"} {
		if fam == "ip6tables" && !c.ipv6On() {
			continue
		}
		out, err := c.sys.Run(ctx, fam, "-w", "-S", "OUTPUT")
		if err != nil {
			c.add("rules", Fail, "restart the container (the entrypoint reloads them)", "%s -S OUTPUT failed: %v: %s", fam, err, strings.TrimSpace(string(out)))
			continue
		}
		s := string(out)
		policyDrop := strings.Contains(s, "-P OUTPUT DROP")
		jump := strings.Contains(s, "-j DEVBOX-OUTPUT")
		switch {
		case policyDrop && jump:
			c.add("rules", OK, "", "%s: OUTPUT policy DROP, devbox's chain in place", fam)
		case policyDrop:
			c.add("rules", Fail, "restart the container (the entrypoint reloads them)", "%s: OUTPUT policy DROP but devbox's chain is missing: everything is denied", fam)
		default:
			c.add("rules", Fail, "restart the container (the entrypoint reloads them)", "%s: OUTPUT policy is not DROP: egress is OPEN", fam)
		}
	}
}

func (c *checker) ipv6On() bool {
	b, err := c.sys.ReadFile("/proc/net/if_inet6")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return false
	}
	d, err := c.sys.ReadFile("/proc/sys/net/ipv6/conf/all/disable_ipv6")
	return err != nil || strings.TrimSpace(string(d)) != "1"
}

func (c *checker) ipv6() {
	if !c.ipv6On() {
		c.add("ipv6", Info, "", "IPv6 is off in this container (kernel or Docker network without --ipv6): there is no IPv6 egress to fence")
		return
	}
	c.add("ipv6", OK, "", "IPv6 is on; the fence loads the same default-deny rules with ip6tables")
}

func (c *checker) privilegeTools() {
	ps, _ := c.self()
	if p, err := c.sys.LookPath("sudo"); err == nil {
		l, fix := Warn, "remove sudo from the image (it is not in devbox's images; check image.packages)"
		if !ps.NoNewPrivs {
			l = Fail
		}
		c.add("sudo", l, fix, "sudo is installed at %s", p)
	} else {
		c.add("sudo", OK, "", "sudo is not installed")
	}
	var found []string
	var seen []fs.FileInfo
dirs:
	for _, dir := range []string{"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin"} {
		// On merged-/usr systems /bin is /usr/bin: list each directory once.
		fi, err := c.sys.Stat(dir)
		if err != nil {
			continue
		}
		for _, s := range seen {
			if os.SameFile(s, fi) {
				continue dirs
			}
		}
		seen = append(seen, fi)
		ents, err := c.sys.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			fi, err := e.Info()
			if err == nil && fi.Mode()&fs.ModeSetuid != 0 {
				found = append(found, filepath.Join(dir, e.Name()))
			}
		}
	}
	switch {
	case len(found) == 0:
		c.add("setuid binaries", OK, "", "none")
	case ps.NoNewPrivs:
		c.add("setuid binaries", Info, "", "%d present but inert under no_new_privs: %s", len(found), strings.Join(found, " "))
	default:
		c.add("setuid binaries", Fail, "turn no_new_privs on (securityOpt no-new-privileges)", "%d present and no_new_privs is off: %s", len(found), strings.Join(found, " "))
	}
}

// mounts checks that the files the host later executes are read-only.
func (c *checker) mounts() {
	if c.o.Workspace == "" {
		return
	}
	b, err := c.sys.ReadFile("/proc/self/mountinfo")
	if err != nil {
		c.add("read-only mounts", Warn, "", "cannot read /proc/self/mountinfo: %v", err)
		return
	}
	ro, err := readOnlyMounts(b)
	if err != nil {
		c.add("read-only mounts", Warn, "", "cannot parse /proc/self/mountinfo: %v", err)
		return
	}
	if c.o.IsolatedWorkspace != "" {
		c.isolatedMode(ro)
		return
	}
	for _, rel := range []string{".git/hooks", ".git/config", ".devcontainer"} {
		p := filepath.Join(c.o.Workspace, rel)
		if _, err := c.sys.Stat(p); err != nil {
			continue
		}
		isRO, mounted := ro[p]
		switch {
		case mounted && isRO:
			c.add("read-only mounts", OK, "", "%s is mounted read-only", p)
		default:
			c.add("read-only mounts", Warn, "mount it read-only (the devcontainer.json `devbox init` writes does: \"mounts\" with readonly)",
				"%s is writable: code in the container could plant something the host later runs", p)
		}
	}
	c.gitDirs(ro)
}

// isolatedMode: the workspace is a clone in a volume; the host's checkout
// is only mounted read-only, to clone from.
func (c *checker) isolatedMode(ro map[string]bool) {
	c.add("git directories", Info, "", "workspace mode: isolated: %s is a clone in a per-container volume; the host checkout is never written "+
		"(work returns with `devbox pull` on the host: objects and refs only)", c.o.IsolatedWorkspace)
	isRO, mounted := ro[layout.OriginDir]
	switch {
	case mounted && isRO:
		c.add("read-only mounts", OK, "", "the host checkout is mounted read-only at %s", layout.OriginDir)
	case mounted:
		c.add("read-only mounts", Fail, "rerun `devbox init --isolated` on the host and rebuild the container",
			"the host checkout is mounted writable at %s", layout.OriginDir)
	default:
		c.add("read-only mounts", Info, "", "the host checkout is not mounted (%s)", layout.OriginDir)
	}
}

// gitDirs reports how the hooks and config of the workspace's other git
// directories (submodules, worktrees, nested repositories), and the files
// other tools run (gitaudit.RunLaterFiles, RunLaterDirs), are protected:
// read-only when they existed when the container was created; otherwise
// only by `devbox audit` on the host before the next start.
func (c *checker) gitDirs(ro map[string]bool) {
	if c.o.GitPaths == nil {
		return
	}
	paths, err := c.o.GitPaths(c.o.Workspace)
	if err != nil {
		c.add("git directories", Warn, "", "cannot list the workspace's git directories: %v", err)
		return
	}
	var roN int
	var writable []string
	for _, rel := range paths {
		if rel == ".git/hooks" || rel == ".git/config" {
			continue // checked above
		}
		if ro[filepath.Join(c.o.Workspace, rel)] {
			roN++
		} else {
			writable = append(writable, rel)
		}
	}
	c.add("git directories", Info, "", "workspace mode: bind (the host checkout); %d more git hooks/config paths mounted read-only "+
		"(with the files other tools run: .vscode, .claude, .mcp.json, .envrc, …); "+
		"`devbox audit` on the host checks every git directory's hooks and config, and those files, before each start", roN)
	if len(writable) > 0 {
		c.add("git directories", Info, "", "writable, created after the container was (the host's `devbox audit` stops the next start until they are accepted; "+
			"Rebuild mounts them read-only): %s", strings.Join(writable, " "))
	}
}

// policyFile is the part of the normalized policy doctor reads.
type policyFile struct {
	Agent struct {
		ClaudeCode string `json:"claudeCode"`
		Login      string `json:"login"`
	} `json:"agent"`
	Credentials struct {
		Anthropic *struct {
			Secret string `json:"secret"`
			Host   string `json:"host"`
		} `json:"anthropic"`
	} `json:"credentials"`
	Network struct {
		Allow []json.RawMessage `json:"allow"`
	} `json:"network"`
	Sandbox struct {
		Enabled bool `json:"enabled"`
	} `json:"sandbox"`
}

func (c *checker) policy(ctx context.Context) {
	b, err := c.sys.ReadFile(c.o.PolicyPath)
	if err != nil {
		c.add("policy", Fail, "use an image built by `devbox build` (it bakes the policy in)", "cannot read the baked policy: %v", err)
		c.bwrap(ctx, false)
		return
	}
	var p policyFile
	if err := json.Unmarshal(b, &p); err != nil {
		c.add("policy", Fail, "rebuild the image with `devbox build`", "%s: %v", c.o.PolicyPath, err)
		return
	}
	if len(p.Network.Allow) == 0 {
		c.add("policy", Info, "", "%s allows no destination: no network at all", c.o.PolicyPath)
	} else {
		c.add("policy", Info, "", "%s allows %d destinations", c.o.PolicyPath, len(p.Network.Allow))
	}
	c.claudeLogin(p)
	c.bwrap(ctx, p.Sandbox.Enabled)
}

// claudeLoginFix is how to take Claude Code's credential out of the
// agent's hands.
const claudeLoginFix = `add "credentials": {"anthropic": {"secret": "anthropic"}} to the policy (and remove agent.login), rebuild, then run ` +
	"`devbox login` on the host: Claude Code then goes through the credential gateway and the agent never holds the credential (docs/credentials.md)"

// claudeLogin says who holds Claude Code's credential: the credential
// gateway (credentials.anthropic), or the agent itself, after a /login in
// the container (agent.login "in-container", or a policy with neither).
func (c *checker) claudeLogin(p policyFile) {
	const check = "claude login"
	switch {
	case p.Agent.ClaudeCode == "" || p.Agent.ClaudeCode == "none":
		return
	case p.Credentials.Anthropic != nil:
		c.add(check, Info, "", "Claude Code goes through the credential gateway (credentials.anthropic, secret %q): the agent never holds the credential", p.Credentials.Anthropic.Secret)
	case p.Agent.Login == "in-container":
		c.add(check, Warn, claudeLoginFix,
			"Claude Code logs in inside the container (agent.login \"in-container\"): the agent holds its own credential in its Claude Code state (%s), "+
				"so it can read it and use it from anywhere it can reach: every host the policy allows, and anywhere else once it has sent it out", claudeStateDir)
	default:
		c.add(check, Warn, claudeLoginFix,
			"the policy has no credentials.anthropic: a /login inside the container leaves Claude Code's token in its state (%s), "+
				"where the agent can read it and use it from anywhere it can reach", claudeStateDir)
	}
}

// claudeStateDir is where Claude Code keeps its login in a devbox
// container (CLAUDE_CONFIG_DIR, the per-container volume).
const claudeStateDir = "~/.claude"

// bwrap checks the per-command sandbox layer `devbox run` uses.
func (c *checker) bwrap(ctx context.Context, wanted bool) {
	path, err := c.sys.LookPath("bwrap")
	if err != nil {
		if wanted {
			c.add("sandbox (bwrap)", Fail, "install bubblewrap in the image (devbox's images do when sandbox.enabled is true)", "sandbox.enabled is true but bwrap is not installed")
		} else {
			c.add("sandbox (bwrap)", Info, "", "bwrap is not installed; the per-command sandbox is off")
		}
		return
	}
	out, err := c.sys.Run(ctx, path, "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "--dev", "/dev", "true")
	if err == nil {
		c.add("sandbox (bwrap)", OK, "", "bwrap can create namespaces here")
		return
	}
	l := Info
	if wanted {
		l = Warn
	}
	c.add("sandbox (bwrap)", l, "Docker's default seccomp profile blocks the namespaces bwrap needs: run the container with a seccomp profile that allows unshare/clone of user namespaces (docs/runtime.md), or set sandbox.enabled to false; the network fence does not depend on it",
		"bwrap cannot create namespaces: %s", strings.TrimSpace(string(out)))
}

// credentials reports each credential gateway route: secret present,
// upstream reachable from the gateway, direct access from here blocked.
func (c *checker) credentials(ctx context.Context) {
	if c.o.Routes == nil {
		return
	}
	routes, err := c.o.Routes(ctx)
	if err != nil {
		c.add("credential gateway", Fail, "restart the container: the entrypoint starts the gateway again",
			"the credential gateway does not answer: %v; requests to the protected hosts fail (closed, not open)", err)
		return
	}
	if !c.owns("credential gateway") {
		return
	}
	for _, r := range routes {
		check := fmt.Sprintf("credentials %s (%s)", r.Host, r.Route)
		direct := "blocked"
		if c.o.DialDirect != nil {
			if err := c.o.DialDirect(ctx, r.Host); err == nil {
				c.add(check, Fail, "restart the container so the entrypoint reloads the rules; until then the agent can use its own credentials there",
					"a direct TCP connection to %s:443 from uid %d succeeded: only the gateway (uid 996) may connect", r.Host, c.sys.Geteuid())
				continue
			} else {
				direct = "blocked (" + err.Error() + ")"
			}
		}
		switch {
		case !r.SecretSet:
			// On the host, in the repository, devbox finds this container
			// itself (internal/workspace); login stores Claude's credential.
			fix, answer := fmt.Sprintf("on the host, in the repository: devbox secret set %s", r.Secret), "503"
			if r.Route == "anthropic" {
				fix, answer = "on the host, in the repository: devbox login", "403 naming devbox login"
			}
			c.add(check, Warn, fix, "secret %q is not set: requests get %s; direct access %s", r.Secret, answer, direct)
		case r.UpstreamSkipped:
			c.add(check, OK, "", "secret %q set, upstream not checked, direct access %s", r.Secret, direct)
		case r.Upstream != "":
			c.add(check, Warn, "check network.allow and the DNS filter (`devbox firewall log`), and that the host presents a certificate the system trusts",
				"secret %q set, but the gateway cannot reach %s:443: %s; direct access %s", r.Secret, r.Host, r.Upstream, direct)
		default:
			c.add(check, OK, "", "secret %q set, upstream reachable (TLS verified), direct access %s", r.Secret, direct)
		}
	}
}
