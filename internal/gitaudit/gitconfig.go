package gitaudit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Entry is one variable of a git config file, as git itself printed it.
type Entry struct {
	// Name is the variable name exactly as `git config --list` printed
	// it: section and key lowercased, the subsection as written, and cut
	// at a NUL the way git's callbacks see it ("[core \"fsmonitor\x00\"]"
	// gives "core.fsmonitor").
	Name string
	// Value is the value as git printed it; NoValue marks a key written
	// alone ("[core] bare"), which git reads as boolean true.
	Value   string
	NoValue bool
}

// splitName splits a variable name at its first and last dot, as git
// does (a subsection may itself contain dots).
func splitName(name string) (section, sub, key string) {
	first := strings.IndexByte(name, '.')
	last := strings.LastIndexByte(name, '.')
	if first < 0 {
		return "", "", name
	}
	if first == last {
		return name[:first], "", name[last+1:]
	}
	return name[:first], name[first+1 : last], name[last+1:]
}

// gitTimeout bounds one `git config` run; the input is a file already in
// memory, so only a wedged machine gets near it.
const gitTimeout = 20 * time.Second

// ConfigReader reads config files with the installed git, so that what the
// audit judges is what git will act on: no parser of devbox's own can
// disagree with git on a corner of the syntax (a NUL in a subsection, a
// continuation, a quote). It runs `git config --no-includes --file -
// --list --null` with the file's bytes on standard input, outside any repository (its
// working directory is an empty private directory), with no system or
// global config, an empty HOME, and a clean environment: git reads one
// file and runs nothing. Includes are not followed by git here (git 2.39
// follows them for a file on stdin unless told not to, and has no
// directory for relative ones); Scan follows them itself,
// the way git does (includeTarget), and the tests check both agree with
// `git config --file F --includes`.
type ConfigReader struct {
	Git string // git binary; "" means "git" on PATH
	dir string // empty working directory and HOME
}

// NewConfigReader makes a reader; Close removes its directory.
func NewConfigReader(git string) (*ConfigReader, error) {
	if git == "" {
		p, err := exec.LookPath("git")
		if err != nil {
			return nil, fmt.Errorf("the audit reads git config with git itself: %w", err)
		}
		git = p
	}
	dir, err := os.MkdirTemp("", "devbox-audit-*")
	if err != nil {
		return nil, err
	}
	return &ConfigReader{Git: git, dir: dir}, nil
}

// Close removes the reader's directory.
func (r *ConfigReader) Close() error { return os.RemoveAll(r.dir) }

// Env is the whole environment git runs with: nothing inherited, so no
// GIT_CONFIG_PARAMETERS, GIT_DIR or GIT_EXEC_PATH can change what it does.
func (r *ConfigReader) env() []string {
	return []string{
		"PATH=/usr/bin:/bin",
		"HOME=" + r.dir,
		"XDG_CONFIG_HOME=" + r.dir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_CEILING_DIRECTORIES=" + r.dir,
		"LC_ALL=C",
	}
}

// Read returns the entries git reads from data. When git refuses the file,
// the error carries git's message, and the entries git printed before it
// stopped are returned too.
func (r *ConfigReader) Read(data []byte) ([]Entry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.Git, "config", "--no-includes", "--file", "-", "--list", "--null")
	cmd.Dir = r.dir
	cmd.Env = r.env()
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	entries := parseList(stdout.Bytes())
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		msg = strings.ReplaceAll(msg, "in standard input", "")
		if msg == "" {
			msg = err.Error()
		}
		return entries, errors.New(strings.TrimPrefix(msg, "fatal: "))
	}
	return entries, nil
}

// parseList reads `git config --list --null`: records ended by NUL, each
// "name\nvalue" or "name" alone for a key with no value. A last record
// without its NUL (git died mid-write) is dropped.
func parseList(out []byte) []Entry {
	var es []Entry
	for len(out) > 0 {
		rec, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			break
		}
		out = rest
		name, value, hasValue := bytes.Cut(rec, []byte{'\n'})
		es = append(es, Entry{Name: string(name), Value: string(value), NoValue: !hasValue})
	}
	return es
}

// IncludedConfigs returns every file the config files include, directly
// or through one another, whatever the include's condition (includeIf is
// read as always true: generous, like the rest of the model), absolute,
// missing ones included (git skips a missing include, so creating one
// is how it gets in). home resolves "~/"; git is as for NewConfigReader.
// `devbox run` audits the ones its sandbox leaves writable: the user's
// global config is read-only in every run, the ~/.gitconfig.local it
// includes may not be.
func IncludedConfigs(files []string, home, git string) ([]string, error) {
	r, err := NewConfigReader(git)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s := &scanner{opts: Options{Home: home}}
	seen := map[string]bool{}
	var out []string
	var visit func(path string, depth int)
	visit = func(path string, depth int) {
		if depth > maxIncludeDepth || seen[path] {
			return
		}
		seen[path] = true
		if depth > 0 {
			out = append(out, path)
		}
		data, _, err := readRegular(path, maxConfig)
		if err != nil {
			return
		}
		entries, _ := r.Read(data)
		for _, e := range entries {
			section, _, k := splitName(e.Name)
			if (section == "include" || section == "includeif") && k == "path" && e.Value != "" {
				if t := s.expandPath(e.Value, filepath.Dir(path)); filepath.IsAbs(t) {
					visit(t, depth+1)
				}
			}
		}
	}
	for _, f := range files {
		visit(f, 0)
	}
	return out, nil
}
