package sandbox_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// The real-bwrap tests run `devbox run` (the built binary) as root and as
// uid 1000, with a temporary HOME and workspace, never the real ones.
//
// With DEVBOX_SANDBOX_INSIDE=1 the same tests run as the current user only,
// with the installed devbox (PATH) and no root: e2e/sandbox_test.go copies
// this package's test binary into a devbox container and runs it there as
// the remote user, so the container gets exactly the same cases.
const insideEnv = "DEVBOX_SANDBOX_INSIDE"

func inside() bool { return os.Getenv(insideEnv) == "1" }

const secret = "TOP-SECRET-VALUE"

type box struct {
	t         *testing.T
	devbox    string
	home, ws  string
	outside   string
	policy    string
	cred      *syscall.Credential
	uid       int
	extraArgs []string
}

func newBox(t *testing.T, uid int) *box {
	t.Helper()
	if !inside() {
		devboxtest.RequireRoot(t)
	}
	devboxtest.RequireBinary(t, "bwrap")
	root := t.TempDir()
	// uid 1000 must reach it: t.TempDir's parent is private.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Outside every writable path (/tmp is writable in the sandbox).
	outside, err := os.MkdirTemp("/var/tmp", "devbox-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	// The policy too: devbox run refuses one its sandbox could write.
	polDir, err := os.MkdirTemp("/var/tmp", "devbox-e2e-policy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(polDir) })
	os.Chmod(polDir, 0o755)
	var bin []byte
	b := &box{t: t, uid: uid,
		home: filepath.Join(root, "home"), ws: filepath.Join(root, "home", "src", "ws"),
		outside: outside, policy: filepath.Join(polDir, "policy.jsonc")}
	if inside() {
		bin, err = os.ReadFile(devboxtest.RequireBinary(t, "devbox"))
	} else {
		bin, err = os.ReadFile(devboxtest.BuildDevbox(t))
	}
	if err != nil {
		t.Fatal(err)
	}
	b.devbox = filepath.Join(root, "devbox")
	write(t, b.devbox, string(bin), 0o755)
	files := map[string]string{
		"home/.ssh/id_ed25519":    secret,
		"home/.aws/credentials":   secret,
		"home/.netrc":             secret,
		"home/.bashrc":            "# bashrc\n",
		"home/.gitconfig":         "[user]\n",
		"home/src/ws/.env":        secret,
		"home/src/ws/app/.env":    secret,
		"home/src/ws/.git/config": "[core]\n",
		"home/src/ws/.git/HEAD":   "ref: refs/heads/main\n",
		"home/src/ws/main.go":     "package main\n",
	}
	for p, c := range files {
		write(t, filepath.Join(root, p), c, 0o600)
	}
	write(t, filepath.Join(outside, "file"), "outside\n", 0o644)
	os.MkdirAll(filepath.Join(b.ws, ".git/hooks"), 0o755)
	// Symlink tricks prepared by an earlier, unconfined step.
	os.Symlink(filepath.Join(b.home, ".ssh"), filepath.Join(b.ws, "keys"))
	os.Symlink(".git/hooks", filepath.Join(b.ws, "hooks"))
	// The home is writable by policy, so that the home's mandatory denies
	// are what stops the writes, not the read-only root.
	write(t, b.policy, fmt.Sprintf(`{
		// test policy
		"sandbox": {"enabled": true, "allowWrite": [%q], "denyRead": ["~/.ssh", "~/.aws", "~/.netrc", "**/.env"]},
	}`, b.home), 0o644)
	if uid != 0 && uid != os.Getuid() {
		b.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
		for _, d := range []string{root, outside} {
			filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, uid) })
		}
	}
	return b
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// run runs `devbox run [flags] -- sh -c script` and returns its output
// (stdout, then stderr after a "--- stderr" line) and exit status.
func (b *box) run(script string, flags ...string) (string, int) {
	b.t.Helper()
	args := append([]string{"run", "--policy", b.policy, "--workspace", b.ws}, flags...)
	args = append(args, "--", "sh", "-c", script)
	for attempt := 1; ; attempt++ {
		cmd := exec.Command(b.devbox, args...)
		cmd.Dir = b.ws
		cmd.Env = []string{"HOME=" + b.home, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		if b.cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		out := stdout.String() + "--- stderr\n" + stderr.String()
		if attempt < 3 && mountRace.MatchString(stderr.String()) {
			b.t.Logf("attempt %d: bwrap lost a mount that another test's container took away during its setup (the command did not start); again:\n%s", attempt, stderr.String())
			continue
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			b.t.Fatalf("devbox run: %v", err)
		}
		return out, code
	}
}

// mountRace is bwrap's setup error when a mount under / goes away between
// its listing and its remount: bwrap binds / recursively and read-only,
// remounting every mount under it, and on the test host the e2e processes
// start and stop containers all along, whose overlay mounts come and go
// (seen once in a cold .ci/run; a private mount namespace does not help,
// since removing a mount point detaches the mounts on it in every
// namespace). The command never started, so running it again is sound. A
// devbox container mounts nothing while the agent works.
var mountRace = regexp.MustCompile(`(?m)^bwrap: Can't bind mount /oldroot/ on /newroot/: Unable to apply mount flags: remount "/newroot/[^"]*": (Invalid argument|No such file or directory)$`)

func forEachUser(t *testing.T, f func(t *testing.T, b *box)) {
	if inside() {
		devboxtest.RequireE2E(t)
		if os.Getuid() == 0 {
			t.Fatalf("%s=1: run as the container's non-root user, not root", insideEnv)
		}
		t.Run(fmt.Sprintf("uid%d", os.Getuid()), func(t *testing.T) { f(t, newBox(t, os.Getuid())) })
		return
	}
	devboxtest.RequireRoot(t)
	for _, uid := range []int{0, 1000} {
		t.Run(fmt.Sprintf("uid%d", uid), func(t *testing.T) { f(t, newBox(t, uid)) })
	}
}

func TestE2EDenyRead(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		for _, p := range []string{
			"~/.ssh/id_ed25519", "~/.aws/credentials", "~/.netrc", ".env", "app/.env",
			"keys/id_ed25519", // a link in the workspace to ~/.ssh
		} {
			p = strings.Replace(p, "~", b.home, 1)
			out, _ := b.run("cat " + p + "; ls -a " + filepath.Dir(p))
			if strings.Contains(out, secret) || strings.Contains(out, "id_ed25519\n") {
				t.Errorf("reading %s inside the sandbox got it:\n%s", p, out)
			}
		}
		// The control: the same files are readable outside.
		if b, _ := os.ReadFile(filepath.Join(b.home, ".ssh/id_ed25519")); string(b) != secret {
			t.Fatalf("test setup: secret not in place")
		}
	})
}

// attacks are the ways a command could try to get content into a protected
// path: write it, replace it, create it, or move its directory away and make
// a new one.
func attacks(p string) []string {
	d := filepath.Dir(p)
	return []string{
		fmt.Sprintf("echo evil > %q", p),
		fmt.Sprintf("echo evil >> %q", p),
		fmt.Sprintf("rm -rf %q; echo evil > %q", p, p),
		fmt.Sprintf("mv %q %q.old; echo evil > %q", p, p, p),
		fmt.Sprintf("mkdir -p %q && echo evil > %q/x", p, p),
		fmt.Sprintf("mv %q %q.moved; mkdir -p %q && echo evil > %q", d, d, d, p),
		fmt.Sprintf("ln -sf /tmp/evil %q", p),
	}
}

func TestE2EMandatoryDenyWrite(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		// Each attacked path, and where a successful attack would land.
		paths := [][2]string{
			// existing
			{"~/.bashrc"}, {"~/.gitconfig"}, {"$W/.git/config"}, {"$W/.git/hooks/pre-commit"},
			// not existing yet
			{"~/.profile"}, {"~/.zshrc"}, {"~/.claude/commands/x.md"}, {"$W/.gitmodules"}, {"$W/.mcp.json"},
			{"$W/.vscode/settings.json"}, {"$W/.idea/workspace.xml"}, {"$W/.devcontainer/devcontainer.json"},
			{"$W/.claude/commands/evil.md"}, {"$W/.claude/agents/evil.md"}, {"$W/.claude/settings.json"},
			// through a link in the workspace to .git/hooks (moving the link
			// away and making a plain hooks/ directory is harmless)
			{"$W/hooks/post-checkout", "$W/.git/hooks/post-checkout"},
		}
		expand := strings.NewReplacer("~", b.home, "$W", b.ws).Replace
		for _, pp := range paths {
			p, landing := expand(pp[0]), expand(pp[0])
			if pp[1] != "" {
				landing = expand(pp[1])
			}
			for _, a := range attacks(p) {
				b.run(a)
			}
			for _, c := range []string{landing, filepath.Join(landing, "x")} {
				if got, err := os.ReadFile(c); err == nil && strings.Contains(string(got), "evil") {
					t.Errorf("%s was written from inside the sandbox", c)
				}
			}
			if fi, err := os.Lstat(landing); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				t.Errorf("%s was replaced by a symlink from inside the sandbox", landing)
			}
		}
		// Every hook still in place, and no new hook.
		hooks, _ := os.ReadDir(filepath.Join(b.ws, ".git/hooks"))
		if len(hooks) != 0 {
			t.Errorf(".git/hooks has %d entries after the attacks, want 0", len(hooks))
		}
		if _, err := os.Stat(filepath.Join(b.ws, ".git/HEAD")); err != nil {
			t.Errorf(".git was moved away: %v", err)
		}
	})
}

func TestE2EWritablePaths(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		out, code := b.run("echo ok > new.txt && mkdir -p sub && echo ok > sub/f && echo ok > /tmp/devbox-e2e-$$ && rm /tmp/devbox-e2e-$$")
		if code != 0 {
			t.Fatalf("writing the workspace and /tmp failed (%d):\n%s", code, out)
		}
		if got, _ := os.ReadFile(filepath.Join(b.ws, "sub/f")); string(got) != "ok\n" {
			t.Errorf("workspace write not visible outside: %q", got)
		}
		for _, p := range []string{filepath.Join(b.outside, "file"), filepath.Join(b.outside, "new"), "/etc/devbox-e2e", "/usr/local/devbox-e2e"} {
			out, code := b.run(fmt.Sprintf("echo evil > %q", p))
			if code == 0 {
				t.Errorf("writing %s outside the writable paths succeeded:\n%s", p, out)
			}
			if got, err := os.ReadFile(p); err == nil && strings.Contains(string(got), "evil") {
				t.Errorf("%s was written", p)
				os.Remove(p)
			}
		}
	})
}

func TestE2ENoNetwork(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		// /proc/net is per network namespace (/sys/class/net is not: it
		// shows the namespace sysfs was mounted in).
		probe := fmt.Sprintf("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo routes; tail -n +2 /proc/net/route; tail -n +2 /proc/net/ipv6_route | awk '{print $NF}'; bash -c 'echo > /dev/tcp/127.0.0.1/%d' && echo CONNECTED", port)
		out, _ := b.run(probe, "--no-network")
		stdout := strings.SplitN(out, "--- stderr\n", 2)[0]
		if stdout != "lo\nroutes\nlo\nlo\n" {
			t.Errorf("--no-network: want only lo, no IPv4 route, IPv6 routes on lo only, and no connection to the host's loopback; got:\n%s", out)
		}
		// The control: without --no-network the same connection works.
		out, _ = b.run(probe)
		if !strings.Contains(out, "CONNECTED") {
			t.Errorf("without --no-network the loopback listener was not reachable:\n%s", out)
		}
	})
}

func TestE2EExitStatus(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		for script, want := range map[string]int{"exit 0": 0, "exit 3": 3, "exit 42": 42, "kill -TERM $$": 143, "kill -KILL $$": 137} {
			out, code := b.run(script)
			if code != want {
				t.Errorf("%q: exit status %d, want %d\n%s", script, code, want, out)
			}
			if strings.Contains(out, "devbox:") {
				t.Errorf("%q: devbox printed an error line for the command's status:\n%s", script, out)
			}
		}
	})
}

func TestE2ESignalForwarded(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		marker := filepath.Join(b.ws, "started")
		cmd := exec.Command(b.devbox, "run", "--policy", b.policy, "--workspace", b.ws, "--",
			"sh", "-c", `trap 'exit 7' TERM; touch started; while :; do sleep 0.05; done`)
		cmd.Dir = b.ws
		cmd.Env = []string{"HOME=" + b.home, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for the command to start (bounded by the test's timeout).
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if cmd.ProcessState != nil {
				t.Fatal("devbox run exited early")
			}
			syscall.Nanosleep(&syscall.Timespec{Nsec: 10e6}, nil)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 7 {
			t.Errorf("after SIGTERM to devbox: %v, want exit status 7 from the command's trap", err)
		}
	})
}

func TestE2ETerminal(t *testing.T) {
	script := devboxtest.RequireBinary(t, "script")
	forEachUser(t, func(t *testing.T, b *box) {
		// script(1) gives devbox a pseudo-terminal; an interactive shell
		// inside must see a terminal on stdin and take commands from it.
		inner := fmt.Sprintf("%s run --policy %s --workspace %s -- sh -i", b.devbox, b.policy, b.ws)
		cmd := exec.Command(script, "-qec", inner, "/dev/null")
		cmd.Dir = b.ws
		cmd.Env = []string{"HOME=" + b.home, "PATH=/usr/bin:/bin", "TERM=dumb"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
		cmd.Stdin = strings.NewReader("test -t 0 && echo IS-A-TTY\necho $((6*7))\nexit 5\n")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, io.Discard
		err := cmd.Run()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 5 {
			t.Errorf("interactive shell: %v, want exit status 5\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "IS-A-TTY") || !strings.Contains(out.String(), "42") {
			t.Errorf("interactive shell output lacks the tty check or the answer:\n%s", out.String())
		}
	})
}

// file writes rel under the workspace, owned by the box's user.
func (b *box) file(rel, content string) string {
	b.t.Helper()
	p := filepath.Join(b.ws, rel)
	write(b.t, p, content, 0o644)
	if b.cred != nil {
		for d := p; d != b.ws; d = filepath.Dir(d) {
			os.Lchown(d, b.uid, b.uid)
		}
	}
	return p
}

// The mandatory denies hold at any depth of the workspace, for what exists
// at launch, as sandbox-runtime's do (and deeper: it stops at 3 levels).
func TestE2EMandatoryDenyAtDepth(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		var paths []string
		for _, rel := range []string{
			".bashrc", ".ripgreprc", // the root's, existing
			"sub/.bashrc", "sub/.profile", "sub/.mcp.json", "sub/.gitmodules", "sub/.gitconfig",
			"a/b/c/d/e/.zshrc", "sub/.vscode/settings.json", "sub/.idea/workspace.xml",
			"sub/.claude/commands/x.md", "sub/.claude/agents/y.md",
			"vendor/lib/.git/config", "vendor/lib/.git/hooks/pre-commit",
		} {
			paths = append(paths, b.file(rel, "# original\n"))
		}
		b.file("vendor/lib/.git/HEAD", "ref: refs/heads/main\n")
		for _, p := range paths {
			// One run per path keeps this test short; each attack fails on
			// its own, whatever the previous one did.
			b.run(strings.Join(attacks(p), "; "), "--accept-new-paths")
			for _, c := range []string{p, filepath.Join(p, "x")} {
				if got, err := os.ReadFile(c); err == nil && strings.Contains(string(got), "evil") {
					t.Errorf("%s was written from inside the sandbox", c)
				}
			}
			if got, err := os.ReadFile(p); err != nil || string(got) != "# original\n" {
				t.Errorf("%s after the attacks: %q, %v; want it unchanged", p, got, err)
			}
		}
		// The control: an ordinary file beside them is writable.
		if out, code := b.run("echo ok > sub/notes.txt"); code != 0 {
			t.Errorf("writing sub/notes.txt: status %d\n%s", code, out)
		}
	})
}

// auditLine is the run-end audit's line for one change (see
// gitaudit.Change.String).
func auditLine(status, kind, rel string) string {
	return fmt.Sprintf("AUDIT: %-8s %-10s %s  ", status, kind, rel)
}

// What appears during the run, where no mount could be, is reported by the
// run-end audit, which fails the run unless --accept-new-paths is given.
func TestE2ERunEndAudit(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		b.file("sub/.vscode/settings.json", "{}\n")
		out, code := b.run("mkdir -p clone/.git/hooks && echo evil > clone/.git/hooks/post-checkout && printf '[core]\\n\\tfsmonitor = evil\\n' > clone/.git/config && " +
			"mkdir -p deep/x && echo evil > deep/x/.mcp.json && mkdir -p p/.claude/commands && echo evil > p/.claude/commands/c.md && echo fine > deep/x/notes.txt")
		if code != 1 {
			t.Errorf("dangerous paths created during the run: status %d, want 1\n%s", code, out)
		}
		for _, l := range []string{auditLine("new", "file", "clone/.git/hooks/post-checkout"), auditLine("new", "config", "clone/.git/config"),
			auditLine("new", "gitdir", "clone/.git"), auditLine("new", "runlater", "deep/x/.mcp.json"), auditLine("new", "runlater", "p/.claude/commands/c.md")} {
			if !strings.Contains(out, l) {
				t.Errorf("the audit does not report %q:\n%s", l, out)
			}
		}
		if strings.Contains(out, "notes.txt") {
			t.Errorf("the audit reports an ordinary file:\n%s", out)
		}
		// The command's own failure wins over the audit's status.
		if out, code := b.run("echo evil > deep/x/.bashrc; exit 42"); code != 42 || !strings.Contains(out, auditLine("new", "runlater", "deep/x/.bashrc")) {
			t.Errorf("exit 42 with a new .bashrc: status %d, want 42 and the audit line\n%s", code, out)
		}
		// Accepted: reported, not failed.
		out, code = b.run("mkdir -p other/.git/hooks && echo evil > other/.git/hooks/pre-push", "--accept-new-paths")
		if code != 0 || !strings.Contains(out, auditLine("new", "file", "other/.git/hooks/pre-push")) {
			t.Errorf("--accept-new-paths: status %d, want 0 and the audit line\n%s", code, out)
		}
		// What the last run created is protected from the next run on.
		if out, code := b.run("echo evil >> clone/.git/hooks/post-checkout"); code == 0 || strings.Contains(out, "AUDIT") {
			t.Errorf("a hook made in an earlier run is writable in the next: status %d\n%s", code, out)
		}
		// Nothing dangerous touched: nothing reported.
		if out, code := b.run("echo ok > deep/x/notes.txt"); code != 0 || strings.Contains(out, "AUDIT") {
			t.Errorf("an ordinary write: status %d\n%s", code, out)
		}
		// Content, not metadata: a file over 1 MiB rewritten at the same
		// size with its mtime put back.
		big := strings.Repeat("x", 2<<20)
		p := b.file("big/.envrc", big)
		b.run("true")
		fi, _ := os.Stat(p)
		out, _ = b.run(fmt.Sprintf("printf y | dd of=big/.envrc bs=1 seek=%d conv=notrunc 2>/dev/null; touch -d @%d big/.envrc", 1<<20+3, fi.ModTime().Unix()))
		if !strings.Contains(out, auditLine("changed", "runlater", "big/.envrc")) {
			t.Errorf("a same-size rewrite with the mtime restored is not reported:\n%s", out)
		}
		// Control characters in a path cannot forge or hide report lines.
		out, _ = b.run("mkdir -p \"$(printf 'e\\033[2K\\rvil\\nAUDIT: nothing')\" && echo x > \"$(printf 'e\\033[2K\\rvil\\nAUDIT: nothing')/.envrc\"")
		if !strings.Contains(out, `e\x1b[2K\rvil\nAUDIT: nothing/.envrc`) || strings.ContainsAny(out, "\x1b\r") {
			t.Errorf("a path with ESC, CR and newline is not escaped in the report:\n%q", out)
		}
	})
}

// A run whose devbox is killed (SIGKILL: no audit at its end) does not
// advance the audit's state: the next run reports what it did.
func TestE2EKilledRunAudited(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		b.run("true") // a completed audit: the state
		marker := filepath.Join(b.ws, "started")
		cmd := exec.Command(b.devbox, "run", "--policy", b.policy, "--workspace", b.ws, "--", "sh", "-c", "mkdir k && echo evil > k/.envrc; touch started; sleep 60")
		cmd.Dir = b.ws
		cmd.Env = []string{"HOME=" + b.home, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("devbox run ended before the command started: %v\n%s", err, stderr.String())
			case <-time.After(10 * time.Millisecond):
			}
		}
		cmd.Process.Kill()
		<-exited
		out, code := b.run("true")
		if code == 0 || !strings.Contains(out, auditLine("new", "runlater", "k/.envrc")) {
			t.Errorf("after a killed run, the next run does not report its .envrc: status %d\n%s", code, out)
		}
	})
}

// devbox run refuses a policy its own sandbox could write (an earlier run
// could have written it), and names the files it accepts.
func TestE2EWritablePolicyRefused(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		pol, _ := os.ReadFile(b.policy)
		p := b.file("devbox.policy.jsonc", string(pol))
		cmd := exec.Command(b.devbox, "run", "--policy", p, "--workspace", b.ws, "--", "true")
		cmd.Dir = b.ws
		cmd.Env = []string{"HOME=" + b.home, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "is writable inside the sandbox") || !strings.Contains(string(out), ".devcontainer/") {
			t.Errorf("a policy in the workspace: %v\n%s", err, out)
		}
	})
}

// devbox run's own seccomp filter: io_uring, ptrace, userfaultfd,
// perf_event_open, keyctl and process_vm_readv fail inside (ENOSYS or
// EPERM); the control runs the same calls outside, where none of them
// fails that way.
func TestE2ESeccompFilter(t *testing.T) {
	perl := devboxtest.RequireBinary(t, "perl")
	// syscall numbers: x86-64 only (the arm64 ones differ).
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe uses x86-64 system call numbers")
	}
	probe := `for $n (425, 101, 323, 298, 250, 310) { $r = syscall($n, 0, 0, 0, 0); print "$n:", ($r == -1 ? $!+0 : "ok"), "\n" }`
	want := "425:38\n101:1\n323:38\n298:1\n250:1\n310:1\n"
	ctl, err := exec.Command(perl, "-e", probe).Output()
	if err != nil || string(ctl) == want {
		t.Fatalf("control outside the sandbox: %v %q", err, ctl)
	}
	forEachUser(t, func(t *testing.T, b *box) {
		out, code := b.run("perl -e '" + probe + "'")
		if code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("inside: status %d\n%s\nwant %q (control outside: %q)", code, out, want, ctl)
		}
	})
}

// A directory on the agent's PATH that the sandbox leaves writable (here
// ~/bin, with the home writable by policy) is audited: a `git` planted
// there during a run is reported, and the control shows a shell outside
// the sandbox would run it in place of git.
func TestE2EWritablePathAudited(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		bin := filepath.Join(b.home, "bin")
		os.MkdirAll(bin, 0o755)
		os.Lchown(bin, b.uid, b.uid)
		marker := filepath.Join(b.outside, "planted-git-ran")
		run := func(script string) (string, int) {
			cmd := exec.Command(b.devbox, "run", "--policy", b.policy, "--workspace", b.ws, "--", "sh", "-c", script)
			cmd.Dir = b.ws
			cmd.Env = []string{"HOME=" + b.home, "PATH=" + bin + ":/usr/bin:/bin"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			return string(out), code
		}
		run("true")
		out, code := run(fmt.Sprintf("printf '#!/bin/sh\\ntouch %s\\n' > %s/git && chmod +x %s/git", marker, bin, bin))
		if code == 0 || !strings.Contains(out, auditLine("new", "runlater", filepath.Join(bin, "git"))) {
			t.Errorf("a git planted on PATH: status %d\n%s", code, out)
		}
		ctl := exec.Command("sh", "-c", "git status >/dev/null 2>&1; true")
		ctl.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
		ctl.Run()
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("control: a shell outside did not run the planted git")
		}
	})
}

// put writes the file p (absolute, under the box's root), owned by the
// box's user with the directories it makes.
func (b *box) put(p, content string) {
	b.t.Helper()
	write(b.t, p, content, 0o644)
	if b.cred != nil {
		for d := p; d != b.home && d != "/"; d = filepath.Dir(d) {
			os.Lchown(d, b.uid, b.uid)
		}
	}
}

// The home's run-later places outside PATH, each planted alone in a run
// whose policy makes it writable (the box's: the whole home): the run-end
// audit names it, and a control shows the host program (bash, git,
// python3) runs it. Not named TestE2E…: the container of
// e2e/sandbox_test.go has no python3.
func TestRunLaterHome(t *testing.T) {
	python := devboxtest.RequireBinary(t, "python3")
	git := devboxtest.RequireBinary(t, "git")
	ver, err := exec.Command(python, "-c", `import sys; print("python%d.%d" % sys.version_info[:2])`).Output()
	if err != nil {
		t.Fatal(err)
	}
	pyver := strings.TrimSpace(string(ver))
	forEachUser(t, func(t *testing.T, b *box) {
		marker := filepath.Join(b.outside, "ran")
		// What the user had before: Debian's .bashrc lines for
		// .bash_aliases, a .gitconfig including a missing .gitconfig.local,
		// a venv in the workspace.
		b.put(filepath.Join(b.home, ".bashrc"), "if [ -f ~/.bash_aliases ]; then . ~/.bash_aliases; fi\n")
		b.put(filepath.Join(b.home, ".gitconfig"), "[include]\n\tpath = ~/.gitconfig.local\n")
		if out, err := exec.Command(python, "-m", "venv", "--without-pip", filepath.Join(b.ws, ".venv")).CombinedOutput(); err != nil {
			t.Fatalf("python3 -m venv: %v\n%s", err, out)
		}
		if b.cred != nil {
			filepath.Walk(filepath.Join(b.ws, ".venv"), func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, b.uid, b.uid) })
		}
		repo := filepath.Join(b.outside, "repo")
		if out, err := exec.Command(git, "init", "-q", repo).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		userSite := filepath.Join(b.home, ".local/lib", pyver, "site-packages")
		venvSite := filepath.Join(b.ws, ".venv/lib", pyver, "site-packages")
		host := func(name string, args ...string) {
			cmd := exec.Command(name, args...)
			cmd.Dir = repo
			cmd.Env = []string{"HOME=" + b.home, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
			cmd.Run()
		}
		for _, tc := range []struct {
			name, script, line string
			control            func()
		}{
			{"bash_aliases", "echo 'touch " + marker + "' > ~/.bash_aliases",
				auditLine("new", "runlater", filepath.Join(b.home, ".bash_aliases")),
				func() { host("bash", "-i", "-c", "true") }},
			{"gitconfig include", "printf '[core]\\n\\tfsmonitor = touch " + marker + "; false\\n' > ~/.gitconfig.local",
				auditLine("new", "config", filepath.Join(b.home, ".gitconfig.local")) + "git reads core.fsmonitor",
				func() { host(git, "status") }},
			{"user site .pth", "mkdir -p " + userSite + " && echo \"import os; open('" + marker + "', 'w')\" > " + userSite + "/zz.pth",
				auditLine("new", "runlater", filepath.Join(userSite, "zz.pth")),
				func() { host(python, "-c", "pass") }},
			// A venv's .pth, not its sitecustomize.py: Debian's python
			// has its own sitecustomize in the standard library, which
			// comes first on sys.path (the unit tests cover the name).
			{"venv .pth", "echo \"import os; open('" + marker + "', 'w')\" > " + venvSite + "/zz.pth",
				auditLine("new", "runlater", ".venv/lib/"+pyver+"/site-packages/zz.pth"),
				func() { host(filepath.Join(b.ws, ".venv/bin/python"), "-c", "pass") }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				os.Remove(marker)
				b.run("true") // a completed audit: the state
				out, code := b.run(tc.script)
				if code != 1 || !strings.Contains(out, tc.line) {
					t.Errorf("planted: status %d, want 1 and %q\n%s", code, tc.line, out)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatal("the plant ran during the run or its audit")
				}
				tc.control()
				if _, err := os.Stat(marker); err != nil {
					t.Errorf("control: the host program did not run the plant (so the case proves nothing)")
				}
			})
		}
		// Claude Code's state, when it exists, is read-only in every run
		// (home writable or not); one created in a run is reported.
		claude := filepath.Join(b.home, ".claude.json")
		b.put(claude, "{}\n")
		if out, code := b.run("echo '{\"mcpServers\":{}}' > ~/.claude.json"); code == 0 {
			t.Errorf("~/.claude.json written in a run:\n%s", out)
		}
		if got, _ := os.ReadFile(claude); string(got) != "{}\n" {
			t.Errorf("~/.claude.json after the run: %q", got)
		}
		line := auditLine("new", "runlater", filepath.Join(b.home, ".claude/.claude.json"))
		if out, code := b.run("echo '{}' > ~/.claude/.claude.json"); code != 1 || !strings.Contains(out, line) {
			t.Errorf("a new ~/.claude/.claude.json: status %d, want 1 and %q\n%s", code, line, out)
		}
	})
}

// The caches devbox run makes writable whatever the policy says (~/.npm,
// ~/.cache) do not make their run-later parts writable: npx's packages
// and pre-commit's environments are read-only unless allowWrite names
// them, and audited when it does.
func TestE2ECacheRunLater(t *testing.T) {
	forEachUser(t, func(t *testing.T, b *box) {
		for _, d := range []string{".npm", ".cache"} {
			b.put(filepath.Join(b.home, d, "keep"), "")
		}
		for _, allow := range []string{``, `"~/.npm", "~/.cache/pre-commit"`} {
			write(t, b.policy, `{"sandbox": {"enabled": true, "allowWrite": [`+allow+`]}}`, 0o644)
			b.run("true")
			out, code := b.run("mkdir -p ~/.npm/_npx/1234/node_modules && echo evil > ~/.npm/_npx/1234/package.json; " +
				"mkdir -p ~/.cache/pre-commit/repo1 && echo evil > ~/.cache/pre-commit/repo1/hook; echo ok > ~/.npm/other; echo ok > ~/.cache/other")
			for _, p := range []string{".npm/_npx/1234/package.json", ".cache/pre-commit/repo1/hook"} {
				_, err := os.Stat(filepath.Join(b.home, p))
				line := auditLine("new", "runlater", filepath.Join(b.home, p))
				switch {
				case allow == "" && err == nil:
					t.Errorf("~/%s written with no allowWrite for it:\n%s", p, out)
				case allow != "" && (err != nil || !strings.Contains(out, line) || code != 1):
					t.Errorf("~/%s with allowWrite %s: %v, status %d, want it written and %q\n%s", p, allow, err, code, line, out)
				}
			}
			for _, p := range []string{".npm/other", ".cache/other"} {
				if _, err := os.Stat(filepath.Join(b.home, p)); err != nil {
					t.Errorf("control: the cache ~/%s is not writable: %v\n%s", p, err, out)
				}
			}
		}
	})
}

// What docs/sandbox.md says devbox cannot refuse: a process of the
// agent's uid outside the sandbox attaches to the sandboxed command with
// ptrace (bwrap's user namespace is that uid's, and a namespace's owner
// has every capability in it), while the same attach from inside is
// refused (the seccomp filter). Not named TestE2E…: run on the test host
// only.
func TestSandboxPtraceFromOutside(t *testing.T) {
	perl := devboxtest.RequireBinary(t, "perl")
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe uses x86-64 system call numbers")
	}
	devboxtest.RequireRoot(t)
	b := newBox(t, 1000)
	cmd := exec.Command(b.devbox, "run", "--policy", b.policy, "--workspace", b.ws, "--", "sh", "-c", "touch started; exec sleep 29.5")
	cmd.Dir = b.ws
	cmd.Env = []string{"HOME=" + b.home, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var sleeper int
	for i := 0; i < 500 && sleeper == 0; i++ {
		time.Sleep(10 * time.Millisecond)
		sleeper = descendant(cmd.Process.Pid, "sleep\x0029.5\x00")
	}
	if sleeper == 0 {
		t.Fatal("the sandboxed sleep did not start")
	}
	// PTRACE_SEIZE (0x4206), then detach (17): 0 when attached, else errno.
	probe := `for $p (@ARGV) { $r = syscall(101, 0x4206, $p+0, 0, 0); print $r == -1 ? $!+0 : 0; syscall(101, 17, $p+0, 0, 0) }`
	out, err := exec.Command("setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", perl, "-e", probe, fmt.Sprint(sleeper)).CombinedOutput()
	if err != nil || string(out) != "0" {
		t.Errorf("attach from outside as uid 1000: %v %q, want 0 (attached), as docs/sandbox.md says", err, out)
	}
	out2, code := b.run(`perl -e '` + probe + `' $$`)
	if code != 0 || !strings.HasPrefix(out2, "1") {
		t.Errorf("attach from inside: status %d %q, want 1 (EPERM)", code, out2)
	}
}

// descendant returns a descendant of pid whose command line is cmdline
// (NUL-separated), or 0.
func descendant(pid int, cmdline string) int {
	parents := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …": comm may hold spaces and parentheses.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		var state string
		var ppid int
		fmt.Sscan(string(rest), &state, &ppid)
		parents[p] = ppid
	}
	for p := range parents {
		if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); string(c) != cmdline {
			continue
		}
		for q := parents[p]; q > 1; q = parents[q] {
			if q == pid {
				return p
			}
		}
	}
	return 0
}

// TestRunRealWork: the run-end audit's false alarms on real work. As uid
// 1000, with the default policy and the caches a devbox image makes
// (~/.npm, ~/.cache, ~/go), offline: `npm ci` of a project with a
// dependency from a local tarball (with a bin and a postinstall script),
// `go build` and `go vet` of a module with a vendored dependency, a venv
// made in the run and `pip install .` then `pip install -e .` of a local
// package (run from its sub-directory, so devbox makes placeholders
// there). Each must succeed and the audit report nothing. It logs the
// files each wrote and its time (the figures in docs/sandbox.md). Not
// named TestE2E…: the container of e2e/sandbox_test.go has no npm, go or
// python3.
func TestRunRealWork(t *testing.T) {
	npm := devboxtest.RequireBinary(t, "npm")
	goBin := devboxtest.RequireBinary(t, "go")
	const python = "/usr/bin/python3" // Debian's, which uid 1000 can run
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("%s: %v", python, err)
	}
	b := newBox(t, 1000)
	write(t, b.policy, `{"sandbox": {"enabled": true}}`, 0o644)
	pathEnv := filepath.Dir(goBin) + ":/usr/bin:/bin"
	setup := func(dir string, name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + pathEnv}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}

	// npm: a dependency packed to a tarball outside the workspace.
	dep := filepath.Join(b.outside, "dep")
	write(t, filepath.Join(dep, "package.json"), `{"name": "dep", "version": "1.0.0", "bin": {"dep": "cli.js"},
		"scripts": {"postinstall": "node -e \"require('fs').writeFileSync('built.txt', 'ok')\""}}`, 0o644)
	write(t, filepath.Join(dep, "cli.js"), "#!/usr/bin/env node\nconsole.log('dep ran')\n", 0o755)
	setup(dep, npm, "pack", "--pack-destination", b.outside)
	write(t, filepath.Join(b.ws, "web/package.json"), fmt.Sprintf(`{"name": "web", "version": "1.0.0",
		"dependencies": {"dep": "file:%s/dep-1.0.0.tgz"}, "scripts": {"build": "dep"}}`, b.outside), 0o644)
	setup(filepath.Join(b.ws, "web"), npm, "install", "--package-lock-only", "--offline", "--no-audit", "--no-fund")

	// go: a module with a vendored dependency.
	for p, c := range map[string]string{
		"goapp/go.mod":                         "module example.test/app\n\ngo 1.22\n\nrequire example.test/lib v1.0.0\n",
		"goapp/main.go":                        "package main\n\nimport \"example.test/lib\"\n\nfunc main() { println(lib.Answer()) }\n",
		"goapp/main_test.go":                   "package main\n\nimport (\n\t\"testing\"\n\n\t\"example.test/lib\"\n)\n\nfunc TestAnswer(t *testing.T) {\n\tif lib.Answer() != 42 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
		"goapp/vendor/modules.txt":             "# example.test/lib v1.0.0\n## explicit\nexample.test/lib\n",
		"goapp/vendor/example.test/lib/lib.go": "package lib\n\nfunc Answer() int { return 42 }\n",
		// python: a local package, setuptools from Debian (no index).
		"pyapp/pyproject.toml":    "[build-system]\nrequires = [\"setuptools\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"pyapp\"\nversion = \"0.1\"\n",
		"pyapp/pyapp/__init__.py": "ANSWER = 42\n",
	} {
		write(t, filepath.Join(b.ws, p), c, 0o644)
	}
	// A real repository with a commit: go build stamps the binary with it.
	git := devboxtest.RequireBinary(t, "git")
	setup(b.ws, git, "-c", "safe.directory=*", "init", "-q")
	setup(b.ws, git, "-c", "safe.directory=*", "add", ".")
	setup(b.ws, git, "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@x.test", "commit", "-qm", "projects")
	for _, d := range []string{b.ws, filepath.Join(b.home, ".npm"), filepath.Join(b.home, ".cache"), filepath.Join(b.home, "go"), b.outside} {
		os.MkdirAll(d, 0o755)
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 1000, 1000) })
	}

	run := func(dir, script string) (string, int, time.Duration) {
		t.Helper()
		cmd := exec.Command(b.devbox, "run", "--policy", b.policy, "--workspace", b.ws, "--", "sh", "-c", script)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + b.home, "PATH=" + pathEnv, "GOFLAGS=-mod=vendor", "GOPROXY=off", "GOTOOLCHAIN=local"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code, time.Since(t0)
	}
	run(b.ws, "true") // the first run records the workspace
	for _, tc := range []struct{ name, dir, script, want string }{
		{"npm ci", b.ws, "cd web && npm ci --offline --no-audit --no-fund && npm run build", "dep ran"},
		{"go build", b.ws, "cd goapp && go build ./... && go vet ./... && go build -o app . && ./app", "42"},
		{"pip install", filepath.Join(b.ws, "pyapp"), python + " -m venv --system-site-packages .venv && .venv/bin/pip install --no-index --no-build-isolation . && " +
			".venv/bin/pip install --no-index --no-build-isolation -e . && .venv/bin/python -c 'import pyapp; print(pyapp.ANSWER + 0)'", "42"},
	} {
		before := countFiles(b.ws, b.home)
		out, code, took := run(tc.dir, tc.script)
		reports := strings.Count(out, "AUDIT:")
		t.Logf("%s: status %d, %d files written, %d audit reports, %.1f s", tc.name, code, countFiles(b.ws, b.home)-before, reports, took.Seconds())
		if code != 0 || reports != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: status %d, %d audit reports, want 0 and 0 and %q in the output\n%s", tc.name, code, reports, tc.want, out)
		}
	}
}

// countFiles counts the files (not directories) under the roots.
func countFiles(roots ...string) int {
	n := 0
	for _, r := range roots {
		filepath.WalkDir(r, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
	}
	return n
}

// No nested user namespace inside devbox run: its seccomp filter refuses
// unshare and clone with CLONE_NEWUSER with EPERM (where bwrap's
// --disable-userns also holds, on a host, unshare would otherwise fail
// with ENOSPC: EPERM is the filter's answer) and clone3 with ENOSYS. In a
// container, the weaker mode has no --disable-userns and the filter is
// all there is (docs/sandbox.md). The control: the same user makes one
// outside the sandbox.
func TestE2ENoUserNamespace(t *testing.T) {
	devboxtest.RequireBinary(t, "unshare")
	forEachUser(t, func(t *testing.T, b *box) {
		ctl := exec.Command("unshare", "-U", "true")
		ctl.SysProcAttr = &syscall.SysProcAttr{Credential: b.cred}
		if out, err := ctl.CombinedOutput(); err != nil {
			t.Fatalf("control: unshare -U outside the sandbox: %v\n%s", err, out)
		}
		out, code := b.run("unshare -U true; echo unshare=$?; unshare -Ur true; echo unshare-r=$?")
		if code != 0 || !strings.Contains(out, "unshare=1\n") || !strings.Contains(out, "unshare-r=1\n") ||
			strings.Count(out, "unshare failed: Operation not permitted") != 2 {
			t.Errorf("unshare -U inside: status %d\n%s\nwant both refused with EPERM", code, out)
		}
		if runtime.GOARCH != "amd64" {
			return
		}
		// clone3 (435 on both architectures) with a null argument: EFAULT
		// or EINVAL from the kernel, ENOSYS (38) from the filter. In a
		// container, Docker's profile (and devbox's, built on it) already
		// answers ENOSYS outside: nothing to compare there.
		perl := devboxtest.RequireBinary(t, "perl")
		probe := `$r = syscall(435, 0, 0); print "clone3:", ($r == -1 ? $!+0 : "ok"), "\n"`
		out3, err := exec.Command(perl, "-e", probe).Output()
		if err == nil && string(out3) == "clone3:38\n" && inside() {
			t.Logf("clone3 fails with ENOSYS outside the sandbox too (the container's seccomp profile): not compared")
			return
		}
		if err != nil || string(out3) == "clone3:38\n" {
			t.Fatalf("control: clone3 outside the sandbox: %v %q", err, out3)
		}
		if out, code := b.run("perl -e '" + probe + "'"); code != 0 || !strings.HasPrefix(out, "clone3:38\n") {
			t.Errorf("clone3 inside: status %d\n%s\nwant ENOSYS (38)", code, out)
		}
	})
}

// Ordinary programs still work under the filter: a shell pipeline with a
// background job, ps, git, and where installed python3 and node starting
// processes (glibc's posix_spawn tries clone3 first and falls back to
// clone), and a go build of a small module (the go command starts the
// compiler and linker; Go uses clone), as the agent's user only (a cold
// build cache costs a minute on a loaded machine). On the test host every one of them
// must be there; inside a container, those the image lacks are named and
// left out, and so is ps: in the weaker mode /proc is the container's, in
// which procps cannot find itself by the pid it has in its own PID
// namespace ("fatal library error, lookup self"), filter or not.
func TestE2EOrdinaryPrograms(t *testing.T) {
	cases := []struct {
		bin, script, want string
	}{
		{"sh", `seq 1 1000 | sort -rn | head -n 1; sleep 0 & wait $!; echo bg=$?`, "1000\nbg=0\n"},
		{"ps", `ps -e -o comm= | grep -c . >/dev/null && echo ps=ok`, "ps=ok\n"},
		{"git", `d=$(mktemp -d) && cd $d && git init -q . && echo x > f && git add f &&
			git -c user.name=t -c user.email=t@x.test commit -qm one && git log --format=%s`, "one\n"},
		{"python3", `python3 -c 'import subprocess, threading; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join(); print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout, end="")'`, "thread\nchild\n"},
		{"node", `node -e 'const cp = require("child_process"); process.stdout.write(cp.execFileSync("echo", ["child"]).toString()); cp.spawn("sh", ["-c", "echo spawned"], {stdio: "inherit"})'`, "child\nspawned\n"},
		{"go", `d=$(mktemp -d) && cd $d && printf 'module example.test/hello\n\ngo 1.21\n' > go.mod &&
			printf 'package main\n\nimport "syscall"\n\nfunc main() { syscall.Write(1, []byte("built\\n")) }\n' > main.go &&
			GOTOOLCHAIN=local GOFLAGS= GOPROXY=off go build -o hello . && ./hello`, "built\n"},
	}
	var path []string
	for _, c := range cases {
		p, err := exec.LookPath(c.bin)
		if err == nil {
			path = append(path, filepath.Dir(p))
			continue
		}
		if !inside() {
			devboxtest.RequireBinary(t, c.bin)
		}
	}
	forEachUser(t, func(t *testing.T, b *box) {
		for _, c := range cases {
			if c.bin == "go" && b.uid == 0 {
				continue
			}
			if c.bin == "ps" && inside() {
				t.Logf("ps: left out in a container (the weaker mode's /proc is the container's)")
				continue
			}
			if _, err := exec.LookPath(c.bin); err != nil {
				t.Logf("%s: not installed in this image: left out", c.bin)
				continue
			}
			out, code := b.run("export PATH=" + strings.Join(path, ":") + ":$PATH; " + c.script)
			if code != 0 || !strings.HasPrefix(out, c.want) {
				t.Errorf("%s: status %d\n%s\nwant output %q", c.bin, code, out, c.want)
			}
		}
	})
}
