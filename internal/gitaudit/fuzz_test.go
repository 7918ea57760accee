package gitaudit

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The differential check: for a config file (and what it includes), every
// entry git itself reads in the repository, with includes and includeIf
// conditions as git evaluates them there (`git config --list --includes
// --show-origin` inside the repository), is either on the allow-list with
// a valid value or a change of the audit's verdict against an accepted
// empty repository, named with git's own key. A config git refuses fails
// the audit too.

// checkConfig writes cfg as a repository's config (and inc beside it) and
// applies the check; it returns how many entries git read.
func checkConfig(t testing.TB, git string, cfg, inc []byte) int {
	t.Helper()
	root := t.TempDir()
	gd := filepath.Join(root, ".git")
	for _, d := range []string{"objects", "refs/heads"} {
		os.MkdirAll(filepath.Join(gd, d), 0o755)
	}
	os.WriteFile(filepath.Join(gd, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(gd, "config"), nil, 0o644)
	empty, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	st := empty.State(timeZero)
	os.WriteFile(filepath.Join(gd, "config"), cfg, 0o644)
	os.WriteFile(filepath.Join(gd, "inc"), inc, 0o644)

	cmd := exec.Command(git, "config", "--list", "--null", "--includes", "--show-origin")
	cmd.Dir = root
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + root, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CEILING_DIRECTORIES=" + filepath.Dir(root)}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, gitErr := cmd.Output()

	r, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	d := Compare(st, r)
	reported := map[string]bool{}
	for _, c := range d.Changes {
		if c.Kind == Config {
			reported[c.Path+"\x00"+c.Key+"\x00"+c.Value] = true
		}
	}
	if gitErr != nil && d.OK() {
		t.Fatalf("git refuses the config (%s) and the audit passes\nconfig: %q", strings.TrimSpace(stderr.String()), cfg)
	}
	n := 0
	for len(out) > 0 {
		origin, rest, ok := bytes.Cut(out, []byte{0})
		rec, rest2, ok2 := bytes.Cut(rest, []byte{0})
		if !ok || !ok2 {
			break
		}
		out = rest2
		n++
		name, value, hasValue := bytes.Cut(rec, []byte{'\n'})
		e := Entry{Name: string(name), Value: string(value), NoValue: !hasValue}
		if Allowed(e) {
			continue
		}
		path, _ := strings.CutPrefix(string(origin), "file:")
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		v := e.Value
		if e.NoValue {
			v = "(no value: true)"
		}
		if !reported[r.rel(path)+"\x00"+e.Name+"\x00"+v] {
			t.Fatalf("git reads %q = %q from %s; the audit neither allows it nor reports it\nconfig: %q\ninc: %q\nchanges: %+v",
				e.Name, v, path, cfg, inc, d.Changes)
		}
	}
	return n
}

// rel is Result's view of a path (as the scanner names findings).
func (r *Result) rel(path string) string {
	s := scanner{root: r.Root}
	return s.rel(path)
}

var (
	fuzzSections = []string{"core", "CoRe", "user", "remote \"origin\"", "branch \"main\"", "url \"ext::sh -c x\"", "alias",
		"include", "includeIf \"gitdir:/\"", "includeIf \"onbranch:main\"", "protocol", "protocol \"ext\"", "filter \"x\"",
		"submodule \"s\"", "core \"fsmonitor\x00\"", "core \"x\x00y\"", "core.fsmonitor", "Remote.origin", "imap", "credential"}
	fuzzKeys   = []string{"url", "fetch", "name", "email", "bare", "fsmonitor", "path", "insteadOf", "allow", "x", "hooksPath", "merge", "remote", "active", "tunnel", "helper", "FsMonitor", "repositoryformatversion", "logallrefupdates"}
	fuzzValues = []string{"https://x.test/r", "git@x.test:r", "/srv/r", "ext::sh -c touch% x", "-oProxyCommand=x", "true", "false", "0", "always",
		"\"quoted ; # x\"", "a\\\"b", "inc", "../x", "+refs/heads/*:refs/remotes/origin/*", "refs/heads/main", "origin", "touch x", "a\x00b", "", "t@x.test", "x \\\n y", "http://x.test/r", "file:///srv/r"}
)

// randomConfig builds a config from pieces git reads in many ways:
// quoting, case, NULs, continuations, comments, CRLF, keys on the section
// line, missing values.
func randomConfig(rng *rand.Rand) []byte {
	var b strings.Builder
	pick := func(l []string) string { return l[rng.Intn(len(l))] }
	for i := rng.Intn(4) + 1; i > 0; i-- {
		b.WriteString("[" + pick(fuzzSections) + "]")
		if rng.Intn(4) == 0 {
			b.WriteString(" ; comment")
		}
		nl := "\n"
		if rng.Intn(6) == 0 {
			nl = "\r\n"
		}
		for j := rng.Intn(4) + 1; j > 0; j-- {
			if rng.Intn(5) != 0 {
				b.WriteString(nl + "\t")
			}
			b.WriteString(pick(fuzzKeys))
			if rng.Intn(6) != 0 {
				b.WriteString(" = " + pick(fuzzValues))
			}
			if rng.Intn(8) == 0 {
				b.WriteString(" # c")
			}
		}
		b.WriteString(nl)
	}
	return []byte(b.String())
}

// fuzzCount is how many random configs TestConfigDifferential checks:
// DEVBOX_GITAUDIT_FUZZ overrides it (CI keeps the default, ~20 s on two
// shared cores).
func fuzzCount() int {
	if n, err := strconv.Atoi(os.Getenv("DEVBOX_GITAUDIT_FUZZ")); err == nil {
		return n
	}
	return 600
}

func TestConfigDifferential(t *testing.T) {
	git := needGit(t)
	rng := rand.New(rand.NewSource(1))
	n, keys := fuzzCount(), 0
	for i := 0; i < n; i++ {
		keys += checkConfig(t, git, randomConfig(rng), randomConfig(rng))
	}
	t.Logf("%d random configs, %d entries read by git, each allowed or reported", n, keys)
}

// FuzzConfig is the same check on fuzzer-made bytes:
// go test -fuzz FuzzConfig -fuzztime 60s ./internal/gitaudit/
func FuzzConfig(f *testing.F) {
	git := needGit(f)
	for i, s := range []string{"[core \"fsmonitor\x00\"]\n\tx = y\n", "[include]\n\tpath = inc\n", "[remote \"o\"]\n\turl = ext::sh\n", "[url \"ext::x\"]\n\tinsteadOf = https://x.test/\n"} {
		f.Add([]byte(s), []byte(fmt.Sprintf("[core]\n\tpager = p%d\n", i)))
	}
	f.Fuzz(func(t *testing.T, cfg, inc []byte) { checkConfig(t, git, cfg, inc) })
}
