package gitaudit

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// parseCases are config files written to read the way git reads them,
// including the corners an attacker would use to hide a key from a
// parser that reads differently.
var parseCases = []struct {
	name, src string
	want      []string // name=value, or name alone for NoValue
	wantErr   bool
}{
	{"basic", "[core]\n\tfsmonitor = touch /tmp/x\n", []string{"core.fsmonitor=touch /tmp/x"}, false},
	{"key on the header's line", "[core]fsmonitor=evil\n", []string{"core.fsmonitor=evil"}, false},
	{"case folded", "[CoRe]\n FsMonitor = X\n", []string{"core.fsmonitor=X"}, false},
	{"crlf", "[core]\r\n\tpager = less\r\n", []string{"core.pager=less"}, false},
	{"lone cr in value", "[core]\n\tpager = a\rb\n", []string{"core.pager=a b"}, false},
	{"bom", "\xef\xbb\xbf[core]\n\teditor = vi\n", []string{"core.editor=vi"}, false},
	{"continuation", "[core]\n\tsshCommand = ssh \\\n -i key\n", []string{"core.sshcommand=ssh  -i key"}, false},
	{"quotes and comments", "[alias]\n\tx = \"!echo ; # not a comment\" # comment\n", []string{"alias.x=!echo ; # not a comment"}, false},
	{"escapes", "[a]\n\tb = \"x\\ty\\n\\\\\\\"\"\n", []string{"a.b=x\ty\n\\\""}, false},
	{"whitespace collapse", "[a]\n\tb =   x  \t y   \n", []string{"a.b=x    y"}, false},
	{"subsection", "[filter \"lfs\"]\n\tsmudge = evil\n", []string{"filter.lfs.smudge=evil"}, false},
	{"subsection case kept", "[remote \"Origin\"]\n\turl = x\n", []string{"remote.Origin.url=x"}, false},
	{"subsection escapes", "[diff \"a\\\"b\\\\c\\d\"]\n\ttextconv = t\n", []string{"diff.a\"b\\cd.textconv=t"}, false},
	{"old dot form", "[Diff.Foo]\n\ttextconv = t\n", []string{"diff.foo.textconv=t"}, false},
	{"no value", "[core]\n\tbare\n\tfsmonitor\n", []string{"core.bare", "core.fsmonitor"}, false},
	{"empty value", "[core]\n\tpager =\n", []string{"core.pager="}, false},
	{"semicolon comment", "; c\n# c\n[core] ; c\n\tpager = p ; c\n", []string{"core.pager=p"}, false},
	{"two keys", "[credential]\n\thelper = a\n\thelper = b\n", []string{"credential.helper=a", "credential.helper=b"}, false},
	{"no final newline", "[core]\n\tpager = p", []string{"core.pager=p"}, false},
	{"dash in key", "[a]\n\tb-c = d\n", []string{"a.b-c=d"}, false},
	{"includeIf", "[includeIf \"gitdir:~/x/\"]\n\tpath = ../evil\n", []string{"includeif.gitdir:~/x/.path=../evil"}, false},
	{"nul in value", "[core]\n\tpager = a\x00b\n", []string{"core.pager=a\x00b"}, false},

	{"unterminated quote", "[core]\n\tpager = \"x\n", nil, true},
	{"bad escape", "[core]\n\tpager = \\x\n", nil, true},
	{"key starting with digit", "[core]\n\t1x = y\n", nil, true},
	{"garbage after key", "[core]\n\tpager x\n", nil, true},
	{"unterminated section", "[core\n", nil, true},
	{"unquoted subsection", "[remote origin]\n", nil, true},
}

func entriesString(es []Entry) []string {
	var out []string
	for _, e := range es {
		if e.NoValue {
			out = append(out, e.Name)
		} else {
			out = append(out, e.Name+"="+e.Value)
		}
	}
	return out
}

func TestParseConfig(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			es, err := ParseConfig([]byte(tc.src))
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !strings.HasPrefix(err.Error(), "line ") {
					t.Errorf("error %q does not name the line", err)
				}
				return
			}
			if got := entriesString(es); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// needGit returns the git binary: tests building fixtures with git fail
// without it under DEVBOX_E2E and skip otherwise.
func needGit(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("git")
	if err != nil {
		if devboxtest.E2E() {
			t.Fatalf("%s is set but git is not installed", devboxtest.E2EVar)
		}
		t.Skip("git is not installed")
	}
	return p
}

// TestParseConfigMatchesGit reads every case with git itself (git config
// --file F --list --null, which reads the one file and runs nothing) and
// compares: the parser's reading is git's reading.
func TestParseConfigMatchesGit(t *testing.T) {
	git := needGit(t)
	dir := t.TempDir()
	for i, tc := range parseCases {
		if strings.ContainsRune(tc.src, 0) {
			continue // git's C strings end at the NUL; the audit keeps all
		}
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, fmt.Sprintf("c%d", i))
			os.WriteFile(f, []byte(tc.src), 0o644)
			cmd := exec.Command(git, "config", "--file", f, "--list", "--null")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir)
			out, err := cmd.Output()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("git accepts what ParseConfig refuses: %q", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("git config: %v", err)
			}
			var got []string
			for _, rec := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
				name, value, ok := bytes.Cut(rec, []byte{'\n'})
				if ok {
					got = append(got, string(name)+"="+string(value))
				} else {
					got = append(got, string(name))
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("git reads %q, the case wants %q", got, tc.want)
			}
		})
	}
}
