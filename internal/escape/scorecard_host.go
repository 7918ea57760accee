//go:build linux

package escape

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
)

// secretName matches environment variable names that hold credentials by
// convention (ANTHROPIC_API_KEY, GH_TOKEN, AWS_SECRET_ACCESS_KEY, …).
var secretName = regexp.MustCompile(`(?i)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)`)

// credentialFiles are the usual places credentials live, relative to the
// home directory when not absolute.
var credentialFiles = []string{
	".claude/.credentials.json", ".ssh/id_ed25519", ".ssh/id_rsa", ".aws/credentials", ".netrc",
	".git-credentials", ".config/gh/hosts.yml", ".docker/config.json",
	"/etc/shadow", "/root", layout.SecretsDir,
}

func credentialAttempts(c Config) []Attempt {
	var as []Attempt
	add := func(name, target string, run func(context.Context) error) {
		as = append(as, Attempt{Category: "credentials", Check: Check{Name: name, Target: target, Kind: MustFail, Run: run}})
	}
	add("secret in the environment", "environ", func(context.Context) error { return envSecrets(c.Secret, os.Environ(), nil) })
	home, _ := os.UserHomeDir()
	for _, f := range append(append([]string(nil), credentialFiles...), c.SecretFiles...) {
		p := f
		if !filepath.IsAbs(p) {
			if home == "" {
				continue
			}
			p = filepath.Join(home, p)
		}
		add("read a credential file", p, func(context.Context) error { return readSecret(p, c.Secret) })
	}
	add("other users' processes", "/proc/*/environ", func(context.Context) error { return otherEnviron(c.Secret, false) })
	add("this user's other processes", "/proc/*/environ", func(context.Context) error { return otherEnviron(c.Secret, true) })
	add("other users' processes", "/proc/*/mem", func(context.Context) error { return otherMemory() })
	return as
}

// envSecrets judges an environment: the planted marker in any value, or,
// with no marker, a secret-named variable with a value (not in ours, when
// ours is given: a process's environ is judged against our own).
func envSecrets(marker string, env []string, ours map[string]bool) error {
	var found []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" || ours[kv] {
			continue
		}
		if marker != "" && strings.Contains(v, marker) {
			found = append(found, k+" (the planted secret)")
		} else if marker == "" && secretName.MatchString(k) {
			found = append(found, k)
		}
	}
	if len(found) > 0 {
		sort.Strings(found)
		return escaped("holds %s", strings.Join(found, ", "))
	}
	if marker != "" {
		return errors.New("no variable holds the planted secret")
	}
	return errors.New("no secret-named variable")
}

// readSecret reads p (lists it, for a directory); a missing one is not
// applicable.
func readSecret(p, marker string) error {
	err := readFile(p)
	ee, ok := err.(*escapedError)
	if !ok || marker == "" {
		return err
	}
	if fi, serr := os.Stat(p); serr == nil && !fi.IsDir() {
		if b, _ := os.ReadFile(p); strings.Contains(string(b), marker) {
			return escaped("%s, holding the planted secret", ee.detail)
		}
	}
	return err
}

// proc is one other process, as /proc shows it to us.
type proc struct {
	pid  int
	uid  int // real uid
	comm string
}

// otherProcs lists every process but this one, with its real uid.
func otherProcs() ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var ps []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		p := proc{pid: pid, uid: -1}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) >= 2 && f[0] == "Uid:":
				p.uid, _ = strconv.Atoi(f[1])
			case len(f) >= 2 && f[0] == "Name:":
				p.comm = f[1]
			}
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// otherEnviron reads the environ of other users' processes (sameUser
// false: any byte read is the escape) or of this user's other processes
// (sameUser true: the escape is a secret there that is not in ours, e.g.
// the launcher's environment a sandbox scrubbed from ours but left
// readable in /proc).
func otherEnviron(marker string, sameUser bool) error {
	ps, err := otherProcs()
	if err != nil {
		return invalid("%v", err)
	}
	ours := map[string]bool{}
	for _, kv := range os.Environ() {
		ours[kv] = true
	}
	me := os.Getuid()
	tried, refused := 0, 0
	var lastErr error
	for _, p := range ps {
		if (p.uid == me) != sameUser {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.pid))
		if err != nil {
			if os.IsNotExist(err) {
				continue // gone meanwhile
			}
			tried++
			refused++
			lastErr = err
			continue
		}
		tried++
		if len(b) == 0 {
			continue // kernel threads and zombies have none
		}
		env := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !sameUser {
			return escaped("read pid %d's environ (uid %d, %s): %d variables", p.pid, p.uid, p.comm, len(env))
		}
		if err := envSecrets(marker, env, ours); err != nil {
			if ee, ok := err.(*escapedError); ok {
				return escaped("pid %d (%s) %s", p.pid, p.comm, ee.detail)
			}
		}
	}
	if tried == 0 {
		return invalid("no such process")
	}
	if refused > 0 {
		return fmt.Errorf("%d of %d refused (%v)", refused, tried, lastErr)
	}
	return fmt.Errorf("%d read, no secret in them", tried)
}

// otherMemory reads the first readable mapping of other users' processes
// through /proc/PID/mem.
func otherMemory() error {
	ps, err := otherProcs()
	if err != nil {
		return invalid("%v", err)
	}
	me := os.Getuid()
	tried := 0
	var lastErr error
	for _, p := range ps {
		if p.uid == me {
			continue
		}
		tried++
		n, err := readMem(p.pid)
		if err == nil && n > 0 {
			return escaped("read %d bytes of pid %d's memory (uid %d, %s)", n, p.pid, p.uid, p.comm)
		}
		if err != nil {
			lastErr = err
		}
	}
	if tried == 0 {
		return invalid("no other user's process")
	}
	return fmt.Errorf("%d processes, none readable (%v)", tried, lastErr)
}

func readMem(pid int) (int, error) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	defer maps.Close()
	var start uint64
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && strings.HasPrefix(f[1], "r") {
			lo, _, _ := strings.Cut(f[0], "-")
			start, _ = strconv.ParseUint(lo, 16, 64)
			break
		}
	}
	if start == 0 {
		return 0, fs.ErrNotExist
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return 0, err
	}
	defer mem.Close()
	buf := make([]byte, 64)
	return mem.ReadAt(buf, int64(start))
}

// Files the host runs later, relative to the workspace and to the home.
var (
	hostRunsInWorkspace = []string{
		".git/hooks/pre-commit", ".git/config", ".devcontainer/devcontainer.json",
		".vscode/settings.json", ".vscode/tasks.json", ".claude/settings.json", ".mcp.json", ".envrc",
	}
	hostRunsInHome = []string{
		".bashrc", ".profile", ".bash_profile", ".zshrc", ".gitconfig", ".config/git/config",
		".claude/settings.json", ".config/Code/User/settings.json",
	}
)

func persistenceAttempts(c Config) []Attempt {
	var as []Attempt
	for _, set := range []struct {
		root string
		rels []string
	}{{c.Workspace, hostRunsInWorkspace}, {c.Home, hostRunsInHome}} {
		if set.root == "" {
			continue
		}
		for _, rel := range set.rels {
			root, rel := set.root, rel
			mark := ""
			if c.LeavePlanted {
				mark = "devbox escape " + c.Nonce + ": planted for the host audit\n"
			}
			as = append(as, Attempt{Category: "persistence", Check: Check{Name: "write a file the host runs", Target: filepath.Join(root, rel), Kind: MustFail,
				Run: func(context.Context) error { return plant(root, rel, mark) }}})
		}
	}
	return as
}

// plant tries to write root/rel, creating its missing directories, and
// removes whatever it created. With a mark, what it could write stays:
// the mark is appended to the file. Git paths in a root with no .git are
// not applicable.
func plant(root, rel, mark string) error {
	if _, err := os.Stat(root); err != nil {
		return invalid("%v", err)
	}
	if strings.HasPrefix(rel, ".git/") {
		if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
			return invalid("%s is not a git repository with a .git directory", root)
		}
	}
	p := filepath.Join(root, rel)
	// The directories to create, outermost first.
	var created []string
	for d := filepath.Dir(p); d != root && d != "/"; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		created = append([]string{d}, created...)
	}
	keep := false // a mark written stays, with its directories
	defer func() {
		for i := len(created) - 1; !keep && i >= 0; i-- {
			os.Remove(created[i])
		}
	}()
	for _, d := range created {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	if mark == "" {
		return writeFile(p)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(mark)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	keep = true
	return escaped("wrote %s (left for the host's audit)", p)
}
