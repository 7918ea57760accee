package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/devbox-dev/devbox/internal/entrypoint"
)

// fakeSys is a fake machine: files under a temporary root, canned
// LookPath and command results, a chosen euid.
type fakeSys struct {
	OS
	euid  int
	paths map[string]string
	runs  map[string]fakeRun
}

type fakeRun struct {
	out string
	err error
}

func (f fakeSys) Geteuid() int { return f.euid }
func (f fakeSys) LookPath(name string) (string, error) {
	if p, ok := f.paths[name]; ok {
		return p, nil
	}
	return "", exec.ErrNotFound
}
func (f fakeSys) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	key := name + " " + strings.Join(args, " ")
	for prefix, r := range f.runs {
		if strings.HasPrefix(key, prefix) {
			return []byte(r.out), r.err
		}
	}
	return nil, errors.New("unexpected command " + key)
}

const (
	userStatus = "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t00000000a80435fb\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
	rootStatus = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t00000000a80435fb\nCapEff:\t00000000a80435fb\nCapBnd:\t00000000a80435fb\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n"
	gateStatus = "Uid:\t997\t997\t997\t997\nGid:\t997\t997\t997\t997\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t00000000a80435fb\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n"
	dnsStatus  = "Uid:\t998\t998\t998\t998\nGid:\t998\t998\t998\t998\nCapInh:\t0000000000000000\nCapPrm:\t0000000000001000\nCapEff:\t0000000000001000\nCapBnd:\t00000000a80435fb\nCapAmb:\t0000000000001000\nNoNewPrivs:\t0\n"
	// Docker's default set plus NET_ADMIN (bit 12) and NET_RAW (13).
	initStatus = "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\nCapPrm:\t00000000a80435fb\nCapEff:\t00000000a80435fb\nCapBnd:\t00000000a80435fb\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n"
	mountinfo  = "100 90 0:50 / / rw,relatime - overlay overlay rw\n" +
		"101 100 8:1 /src/.git/hooks /workspaces/my\\040repo/.git/hooks ro,relatime - ext4 /dev/sda1 rw\n" +
		"102 100 8:1 /src/.devcontainer /workspaces/my\\040repo/.devcontainer ro,relatime - ext4 /dev/sda1 rw\n"
	ws = "/workspaces/my repo"
)

// world writes the files of a healthy fenced container seen by its user;
// each case then changes what it needs.
func world(t *testing.T) (string, map[string]string) {
	t.Helper()
	st, _ := json.Marshal(entrypoint.Status{State: entrypoint.Fenced, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), ElapsedMS: 87.5})
	return t.TempDir(), map[string]string{
		"/.dockerenv":                              "",
		"/proc/self/status":                        userStatus,
		"/proc/1/status":                           initStatus,
		"/proc/42/status":                          dnsStatus,
		"/proc/43/status":                          gateStatus,
		"/proc/net/if_inet6":                       "00000000000000000000000000000001 01 80 10 80       lo\n",
		"/proc/sys/net/ipv6/conf/all/disable_ipv6": "0\n",
		"/proc/self/mountinfo":                     mountinfo,
		"/run/devbox/status":                       string(st),
		"/etc/devbox/policy.json":                  `{"network":{"allow":["a.test","b.test"]},"sandbox":{"enabled":false}}`,
		ws + "/.git/hooks/.keep":                   "",
		ws + "/.devcontainer/devcontainer.json":    "{}",
		"/usr/bin/passwd":                          "",
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(files map[string]string, s *fakeSys)
		want     map[string]Level // check → level of its first finding
		enforced bool
		detail   string            // a substring the text report must contain
		owns     map[string]string // check → why its daemon's sockets are not its own
	}{
		{
			name:     "fenced, as the user",
			want:     map[string]Level{"container": OK, "fence": OK, "dns filter": OK, "name gate": OK, "user": OK, "capabilities": OK, "no_new_privs": OK, "container capabilities": OK, "rules": Info, "ipv6": OK, "sudo": OK, "setuid binaries": Info, "read-only mounts": OK, "policy": Info, "sandbox (bwrap)": Info},
			enforced: true,
			detail:   "fenced and verified at 2026-01-02T03:04:05Z (entrypoint took 87.5 ms)",
		},
		{
			name: "entrypoint failed",
			edit: func(f map[string]string, _ *fakeSys) {
				b, _ := json.Marshal(entrypoint.Status{State: entrypoint.Failed, Reason: "apply: iptables-restore: line 3 failed"})
				f["/run/devbox/status"] = string(b)
			},
			want:   map[string]Level{"fence": Fail},
			detail: "FAILED at 0001-01-01T00:00:00Z and left egress denied entirely: apply: iptables-restore: line 3 failed",
		},
		{
			name:   "entrypoint never ran",
			edit:   func(f map[string]string, _ *fakeSys) { delete(f, "/run/devbox/status") },
			want:   map[string]Level{"fence": Fail},
			detail: "has not run in this container",
		},
		{
			name:   "dns filter down",
			edit:   func(f map[string]string, _ *fakeSys) { delete(f, "/proc/42/status") },
			want:   map[string]Level{"dns filter": Fail},
			detail: "denied (fail closed, not open)",
		},
		{
			name:   "name gate down",
			edit:   func(f map[string]string, _ *fakeSys) { delete(f, "/proc/43/status") },
			want:   map[string]Level{"name gate": Fail, "dns filter": OK},
			detail: "TCP to allowed names is refused (fail closed, not open)",
		},
		{
			name:   "name gate's port taken",
			owns:   map[string]string{"name gate": "tcp [::1]:53443 is taken by a socket that is not the name gate's (uid 1000, socket inode 4242, bound to [::1]:53443)"},
			want:   map[string]Level{"name gate": Fail, "dns filter": OK},
			detail: "not proven to serve from its own sockets: tcp [::1]:53443 is taken by a socket that is not the name gate's (uid 1000",
		},
		{
			name:   "name gate down, its port taken",
			edit:   func(f map[string]string, _ *fakeSys) { delete(f, "/proc/43/status") },
			owns:   map[string]string{"name gate": "name gate is not running (/run/devbox/gate.pid): pid 43 is not running; and tcp 127.0.0.1:53443 is taken by a socket that is not the name gate's (uid 1000, socket inode 9, bound to 127.0.0.1:53443)"},
			want:   map[string]Level{"name gate": Fail, "dns filter": OK},
			detail: "static IP entries still pass; name gate is not running (/run/devbox/gate.pid): pid 43 is not running; and tcp 127.0.0.1:53443 is taken",
		},
		{
			name:   "dns filter's port taken",
			owns:   map[string]string{"dns filter": "udp 127.0.0.1:53535 is taken by a socket that is not the DNS filter's (uid 1000, socket inode 7, bound to 0.0.0.0:53535)"},
			want:   map[string]Level{"dns filter": Fail, "name gate": OK},
			detail: "udp 127.0.0.1:53535 is taken",
		},
		{
			name:   "dns filter a zombie",
			edit:   func(f map[string]string, _ *fakeSys) { f["/proc/42/status"] = "State:\tZ (zombie)\n" + dnsStatus },
			want:   map[string]Level{"dns filter": Fail},
			detail: "denied (fail closed, not open)",
		},
		{
			name: "no_new_privs off, sudo and setuid present",
			edit: func(f map[string]string, s *fakeSys) {
				f["/proc/self/status"] = strings.Replace(userStatus, "NoNewPrivs:\t1", "NoNewPrivs:\t0", 1)
				s.paths["sudo"] = "/usr/bin/sudo"
			},
			want:   map[string]Level{"no_new_privs": Fail, "sudo": Fail, "setuid binaries": Fail},
			detail: "--security-opt no-new-privileges",
		},
		{
			name: "user holds NET_ADMIN",
			edit: func(f map[string]string, _ *fakeSys) {
				f["/proc/self/status"] = strings.Replace(userStatus, "CapAmb:\t0000000000000000", "CapAmb:\t0000000000001000", 1)
			},
			want:   map[string]Level{"capabilities": Fail},
			detail: "holds CAP_NET_ADMIN",
		},
		{
			name: "container without NET_ADMIN",
			edit: func(f map[string]string, _ *fakeSys) {
				// Nothing in the container holds it, the DNS filter included.
				f["/proc/1/status"] = strings.ReplaceAll(initStatus, "a80435fb", "a80425fb")
				f["/proc/42/status"] = strings.ReplaceAll(strings.ReplaceAll(dnsStatus, "a80435fb", "a80425fb"), "0000000000001000", "0000000000000000")
			},
			want:   map[string]Level{"container capabilities": Fail},
			detail: "lacks CAP_NET_ADMIN",
		},
		{
			name: "agent's container of a pod",
			edit: func(f map[string]string, _ *fakeSys) {
				// pid 1 is the pod's pause process; the fence container's
				// DNS filter holds NET_ADMIN.
				f["/proc/1/status"] = strings.ReplaceAll(initStatus, "a80435fb", "a80425fb")
			},
			want:     map[string]Level{"container capabilities": OK},
			detail:   "the fence's own container installed the firewall",
			enforced: true,
		},
		{
			name: "root sees open rules",
			edit: func(f map[string]string, s *fakeSys) {
				f["/proc/self/status"] = rootStatus
				s.euid = 0
				s.runs["iptables -w -S OUTPUT"] = fakeRun{out: "-P OUTPUT ACCEPT\n"}
				s.runs["ip6tables -w -S OUTPUT"] = fakeRun{out: "-P OUTPUT DROP\n-A OUTPUT -j DEVBOX-OUTPUT\n"}
			},
			want:   map[string]Level{"user": Warn, "rules": Fail},
			detail: "iptables: OUTPUT policy is not DROP: egress is OPEN",
		},
		{
			name: "IPv6 off, hooks writable",
			edit: func(f map[string]string, _ *fakeSys) {
				delete(f, "/proc/net/if_inet6")
				f["/proc/self/mountinfo"] = "100 90 0:50 / / rw,relatime - overlay overlay rw\n"
			},
			want:     map[string]Level{"ipv6": Info, "read-only mounts": Warn},
			enforced: true,
			detail:   "/workspaces/my repo/.git/hooks is writable",
		},
		{
			name: "sandbox wanted, bwrap blocked",
			edit: func(f map[string]string, s *fakeSys) {
				f["/etc/devbox/policy.json"] = `{"network":{"allow":[]},"sandbox":{"enabled":true}}`
				s.paths["bwrap"] = "/usr/bin/bwrap"
				s.runs["/usr/bin/bwrap"] = fakeRun{out: "bwrap: No permissions to create new namespace\n", err: errors.New("exit status 1")}
			},
			want:     map[string]Level{"sandbox (bwrap)": Warn, "policy": Info},
			enforced: true,
			detail:   "allows no destination: no network at all",
		},
		{
			name:   "not in a container",
			edit:   func(f map[string]string, _ *fakeSys) { delete(f, "/.dockerenv") },
			want:   map[string]Level{"container": Fail, "sandbox (bwrap)": Info},
			detail: "not in a container",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, files := world(t)
			sys := &fakeSys{OS: OS{Prefix: root}, euid: 1000, paths: map[string]string{}, runs: map[string]fakeRun{}}
			if tc.edit != nil {
				tc.edit(files, sys)
			}
			for p, content := range files {
				full := filepath.Join(root, p)
				os.MkdirAll(filepath.Dir(full), 0o755)
				if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok := files["/usr/bin/passwd"]; ok {
				os.Chmod(filepath.Join(root, "/usr/bin/passwd"), 0o755|os.ModeSetuid)
			}
			rep := Run(context.Background(), sys, Options{StatusPath: "/run/devbox/status", PolicyPath: "/etc/devbox/policy.json", Workspace: ws, DNSUID: 998, GateUID: 997,
				GateHealth: func(context.Context) (string, error) { return "12 passed, 3 refused", nil },
				Owns: func(check string) error {
					if why := tc.owns[check]; why != "" {
						return errors.New(why)
					}
					return nil
				}})
			got := map[string]Level{}
			for _, f := range rep.Findings {
				if _, seen := got[f.Check]; !seen {
					got[f.Check] = f.Level
				}
				if (f.Level == Fail || f.Level == Warn) && f.Fix == "" && f.Check != "container capabilities" {
					t.Errorf("%s: %s without a fix: %s", f.Check, f.Level, f.Detail)
				}
			}
			for check, want := range tc.want {
				if got[check] != want {
					t.Errorf("%s = %q, want %q", check, got[check], want)
				}
			}
			if rep.Enforced != tc.enforced {
				t.Errorf("enforced = %v, want %v", rep.Enforced, tc.enforced)
			}
			var text, js, problems bytes.Buffer
			rep.WriteText(&text)
			rep.WriteProblems(&problems)
			for _, line := range strings.Split(strings.TrimSpace(problems.String()), "\n") {
				if line != "" && !strings.Contains(line, "(fix: ") {
					t.Errorf("problem line without a fix: %s", line)
				}
			}
			if !rep.Enforced && !strings.Contains(problems.String(), "[FAIL]") {
				t.Errorf("not enforced but WriteProblems shows no failure:\n%s", problems.String())
			}
			if !strings.Contains(text.String(), tc.detail) {
				t.Errorf("report lacks %q:\n%s", tc.detail, text.String())
			}
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Findings) != len(rep.Findings) {
				t.Errorf("JSON round trip: %v", err)
			}
		})
	}
}

// TestGitDirs: the workspace mode and how the other git directories'
// hooks and config are protected (read-only mount, or only the host's
// audit for those created after the container).
func TestGitDirs(t *testing.T) {
	root, files := world(t)
	files["/proc/self/mountinfo"] = mountinfo + "103 100 8:1 /src/vendor/x/.git/config /workspaces/my\\040repo/vendor/x/.git/config ro,relatime - ext4 /dev/sda1 rw\n"
	for p, content := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(content), 0o644)
	}
	sys := &fakeSys{OS: OS{Prefix: root}, euid: 1000, paths: map[string]string{}, runs: map[string]fakeRun{}}
	rep := Run(context.Background(), sys, Options{StatusPath: "/run/devbox/status", PolicyPath: "/etc/devbox/policy.json", Workspace: ws, DNSUID: 998,
		GitPaths: func(w string) ([]string, error) {
			if w != ws {
				t.Errorf("GitPaths(%q)", w)
			}
			return []string{".git/config", ".git/hooks", "new/.git/hooks", "vendor/x/.git/config"}, nil
		}})
	var lines []string
	for _, f := range rep.Findings {
		if f.Check == "git directories" {
			lines = append(lines, f.Detail)
		}
	}
	if len(lines) != 2 || !strings.Contains(lines[0], "workspace mode: bind") || !strings.Contains(lines[0], "1 more git hooks/config paths mounted read-only") ||
		!strings.Contains(lines[1], "new/.git/hooks") || strings.Contains(lines[1], "vendor/x") {
		t.Errorf("git directories findings: %q", lines)
	}
}

// TestIsolatedMode: doctor names the mode and checks the checkout's bind
// is read-only.
func TestIsolatedMode(t *testing.T) {
	for _, tc := range []struct {
		opt  string
		want Level
	}{{"ro", OK}, {"rw", Fail}} {
		root, files := world(t)
		files["/proc/self/mountinfo"] = "100 90 0:50 / / rw,relatime - overlay overlay rw\n" +
			"101 100 8:1 /src /mnt/devbox-origin " + tc.opt + ",relatime - ext4 /dev/sda1 rw\n"
		for p, content := range files {
			full := filepath.Join(root, p)
			os.MkdirAll(filepath.Dir(full), 0o755)
			os.WriteFile(full, []byte(content), 0o644)
		}
		sys := &fakeSys{OS: OS{Prefix: root}, euid: 1000, paths: map[string]string{}, runs: map[string]fakeRun{}}
		rep := Run(context.Background(), sys, Options{StatusPath: "/run/devbox/status", PolicyPath: "/etc/devbox/policy.json", Workspace: ws, DNSUID: 998, IsolatedWorkspace: ws})
		var mode bool
		for _, f := range rep.Findings {
			if f.Check == "git directories" && strings.Contains(f.Detail, "workspace mode: isolated") {
				mode = true
			}
			if f.Check == "read-only mounts" && f.Level != tc.want {
				t.Errorf("%s: read-only mounts %s: %s", tc.opt, f.Level, f.Detail)
			}
		}
		if !mode {
			t.Errorf("%s: no isolated mode line: %+v", tc.opt, rep.Findings)
		}
	}
}

func TestCredentialRoutes(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name   string
		routes []Route
		err    error
		direct error
		want   Level
	}{
		{"all good", []Route{{Route: "anthropic", Host: "api.anthropic.com", Secret: "anthropic", SecretSet: true}}, nil, refused, OK},
		{"secret missing", []Route{{Route: "git", Host: "github.com", Secret: "github"}}, nil, refused, Warn},
		{"upstream not checked", []Route{{Route: "git", Host: "github.com", Secret: "github", SecretSet: true, UpstreamSkipped: true}}, nil, refused, OK},
		{"upstream down", []Route{{Route: "git", Host: "github.com", Secret: "github", SecretSet: true, Upstream: "no such host"}}, nil, refused, Warn},
		{"direct access open", []Route{{Route: "anthropic", Host: "api.anthropic.com", Secret: "anthropic", SecretSet: true}}, nil, nil, Fail},
		{"gateway down", nil, errors.New("connection refused"), refused, Fail},
	} {
		c := &checker{sys: &fakeSys{euid: 1000}, o: Options{
			Routes:     func(context.Context) ([]Route, error) { return tc.routes, tc.err },
			DialDirect: func(context.Context, string) error { return tc.direct },
		}}
		c.credentials(context.Background())
		if len(c.out) != 1 || c.out[0].Level != tc.want {
			t.Errorf("%s: findings %+v, want one %s", tc.name, c.out, tc.want)
			continue
		}
		if tc.routes != nil && tc.routes[0].UpstreamSkipped && (!strings.Contains(c.out[0].Detail, "upstream not checked") || strings.Contains(c.out[0].Detail, "reachable")) {
			t.Errorf("%s: %q claims more than was checked", tc.name, c.out[0].Detail)
		}
		if tc.want != OK && c.out[0].Fix == "" {
			t.Errorf("%s: no fix", tc.name)
		}
	}
}

// TestClaudeLogin: who holds Claude Code's credential, read from the baked
// policy through a whole run: the gateway (info), the explicit in-container
// opt-out and a policy with neither (warnings that say what the agent can
// do with it, with a fix, shown by the login banner), no Claude Code
// (nothing).
func TestClaudeLogin(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		want         Level // "" = no finding
		detail       []string
	}{
		{"gateway", `{"agent":{"claudeCode":"2.1.332"},"credentials":{"anthropic":{"secret":"anthropic","host":"api.anthropic.com"}}}`,
			Info, []string{"through the credential gateway", `secret "anthropic"`, "never holds the credential"}},
		{"opt-out", `{"agent":{"claudeCode":"2.1.332","login":"in-container"}}`,
			Warn, []string{`agent.login "in-container"`, "the agent holds its own credential", "read it and use it from anywhere it can reach"}},
		{"neither", `{"agent":{"claudeCode":"2.1.332"}}`,
			Warn, []string{"no credentials.anthropic", "where the agent can read it and use it from anywhere it can reach"}},
		{"no Claude Code", `{"agent":{"claudeCode":"none"}}`, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, files := world(t)
			files["/etc/devbox/policy.json"] = tc.policy
			for p, content := range files {
				full := filepath.Join(root, p)
				os.MkdirAll(filepath.Dir(full), 0o755)
				os.WriteFile(full, []byte(content), 0o644)
			}
			sys := &fakeSys{OS: OS{Prefix: root}, euid: 1000, paths: map[string]string{}, runs: map[string]fakeRun{}}
			rep := Run(context.Background(), sys, Options{StatusPath: "/run/devbox/status", PolicyPath: "/etc/devbox/policy.json", Workspace: ws, DNSUID: 998})
			var got []Finding
			for _, f := range rep.Findings {
				if f.Check == "claude login" {
					got = append(got, f)
				}
			}
			if tc.want == "" {
				if len(got) != 0 {
					t.Errorf("findings %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Level != tc.want {
				t.Fatalf("findings %+v, want one %s", got, tc.want)
			}
			for _, d := range tc.detail {
				if !strings.Contains(got[0].Detail, d) {
					t.Errorf("detail %q lacks %q", got[0].Detail, d)
				}
			}
			var problems bytes.Buffer
			rep.WriteProblems(&problems)
			if banner := strings.Contains(problems.String(), "[warn] claude login:"); banner != (tc.want == Warn) {
				t.Errorf("login banner shows the warning: %v, want %v:\n%s", banner, tc.want == Warn, problems.String())
			}
			if tc.want == Warn && !strings.Contains(got[0].Fix, "devbox login") {
				t.Errorf("fix %q does not say how to hand the credential to the gateway", got[0].Fix)
			}
			var text bytes.Buffer
			rep.WriteText(&text)
			for _, l := range strings.Split(text.String(), "\n") {
				if strings.Contains(l, "claude login") {
					t.Logf("%s: %s", tc.name, l)
				}
			}
		})
	}
}
