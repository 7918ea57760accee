package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The acceptance cases of issue 2: each must be rejected with file:line:col.
const badPolicy = `// acceptance cases
{
  "image": { "colour": "blue" },
  "network": {
    "allow": [
      "*",
      "*.com",
      "a\u0000b.example.com",
      "https://x.test",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.test",
      "x.test:70000",
      "ok.test",
    ],
  },
}
`

func TestParseReportsEveryError(t *testing.T) {
	_, err := Parse("devbox.policy.jsonc", []byte(badPolicy))
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error = %v (%T), want *Errors", err, err)
	}
	want := []string{
		`devbox.policy.jsonc:3:14: image.colour: unknown key "colour" in image (known keys: base, user, packages, tag)`,
		`devbox.policy.jsonc:6:7: network.allow[0]: "*": a bare "*" would allow every host: list the hosts you need, or use presets`,
		`devbox.policy.jsonc:7:7: network.allow[1]: "*.com": a wildcard needs at least two labels after "*." ("*.example.com", not "*.com")`,
		`devbox.policy.jsonc:8:7: network.allow[2]: "a\x00b.example.com": contains a NUL byte at offset 1`,
		`devbox.policy.jsonc:9:7: network.allow[3]: "https://x.test": is a URL: give only the host name, optionally with :port (for example x.test:443)`,
		`devbox.policy.jsonc:10:7: network.allow[4]: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.test": label 1 is 64 characters long; the limit is 63`,
		`devbox.policy.jsonc:11:7: network.allow[5]: "x.test:70000": port 70000 is out of range 1..65535`,
	}
	got := strings.Split(err.Error(), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(errs.List) != len(want) {
		t.Errorf("%d errors, want %d", len(errs.List), len(want))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // the one expected error
	}{
		{"syntax", "{\n  \"image\": {,}\n}", "p:2:13: syntax error: invalid character ',' at start of value"},
		{"empty file", "", "p:1:1: syntax error: parsing value: unexpected EOF"},
		{"not an object", `[]`, "p:1:1: want an object, got an array"},
		{"unknown top key", `{"imgae": {}}`, `p:1:2: imgae: unknown key "imgae" at the top level (known keys: image, agent, network, sandbox, credentials)`},
		{"duplicate key", `{"agent": {}, "agent": {}}`, `p:1:15: agent: duplicate key "agent"`},
		{"wrong type", `{"sandbox": {"enabled": "yes"}}`, `p:1:25: sandbox.enabled: want true or false, got a string`},
		{"null", `{"image": {"base": null}}`, `p:1:20: image.base: want a string, got null (leave the key out to get the default)`},
		{"float uid", `{"image": {"user": {"uid": 1000.5}}}`, `p:1:28: image.user.uid: want an integer, got 1000.5`},
		{"uid 0", `{"image": {"user": {"uid": 0}}}`, `p:1:28: image.user.uid: 0: 0 is root: the agent never runs as root`},
		{"uid too big", `{"image": {"user": {"uid": 60001}}}`, `p:1:28: image.user.uid: 60001: want 1..60000`},
		{"gid reserved", `{"image": {"user": {"gid": 998}}}`, `p:1:28: image.user.gid: 998: 998 is reserved for the DNS filter's account devbox-dns`},
		{"uid of the gate", `{"image": {"user": {"uid": 997}}}`, `p:1:28: image.user.uid: 997: 997 is reserved for the name gate's account devbox-gate`},
		{"name of the gate", `{"image": {"user": {"name": "devbox-gate"}}}`, `p:1:29: image.user.name: "devbox-gate": this name belongs to a system account of the image`},
		{"root user", `{"image": {"user": {"name": "root"}}}`, `p:1:29: image.user.name: "root": the agent never runs as root: pick a non-root user name`},
		{"system user", `{"image": {"user": {"name": "nobody"}}}`, `p:1:29: image.user.name: "nobody": this name belongs to a system account of the image`},
		{"bad user", `{"image": {"user": {"name": "Dev"}}}`, `p:1:29: image.user.name: "Dev": not a portable user name (lower-case letter or "_" first, then lower-case letters, digits, "_" or "-", at most 32 characters)`},
		{"bad package", `{"image": {"packages": ["git", "Foo"]}}`, `p:1:32: image.packages[1]: "Foo": not a Debian package name (lower-case letters, digits, "+", "-" and ".", at least two characters, starting with a letter or digit)`},
		{"pinned package", `{"image": {"packages": ["git=1:2.39"]}}`, `p:1:25: image.packages[0]: "git=1:2.39": version pins are not supported here: give the Debian package name only`},
		{"bad base", `{"image": {"base": "Debian:bookworm"}}`, `p:1:20: image.base: "Debian:bookworm": repository names must be lower-case`},
		{"bad base spaces", `{"image": {"base": "debian bookworm"}}`, `p:1:20: image.base: "debian bookworm": not a valid image reference (want [registry/]repository[:tag][@sha256:…])`},
		{"tag with digest", `{"image": {"tag": "r.test/a@sha256:` + strings.Repeat("a", 64) + `"}}`, `p:1:19: image.tag: "r.test/a@sha256:` + strings.Repeat("a", 64) + `": a push target cannot carry a digest: the registry computes it`},
		{"latest", `{"agent": {"claudeCode": "latest"}}`, `p:1:26: agent.claudeCode: "latest": pin an exact version X.Y.Z (for example 2.1.332) or "none"; "latest", ranges and tags are not allowed`},
		{"caret", `{"agent": {"claudeCode": "^1.2"}}`, `p:1:26: agent.claudeCode: "^1.2": pin an exact version X.Y.Z (for example 2.1.332) or "none"; "latest", ranges and tags are not allowed`},
		{"range", `{"agent": {"claudeCode": ">=2.0.0"}}`, `p:1:26: agent.claudeCode: ">=2.0.0": pin an exact version X.Y.Z (for example 2.1.332) or "none"; "latest", ranges and tags are not allowed`},
		{"unknown preset", `{"network": {"presets": ["gitlab"]}}`, `p:1:26: network.presets[0]: "gitlab": unknown preset (known presets: anthropic, claude-login, debian, github, go, npm, pypi, vscode)`},
		{"deny bad", `{"network": {"deny": [""]}}`, `p:1:23: network.deny[0]: "": empty destination`},
		{"allow not strings", `{"network": {"allow": [443]}}`, `p:1:24: network.allow[0]: want a string, got a number`},
		{"upstream name", `{"network": {"dns": {"upstream": ["dns.test"]}}}`, `p:1:35: network.dns.upstream[0]: "dns.test": want an IP address, optionally with a port (192.0.2.53, [2001:db8::53]:53); names cannot be resolved before the resolver is known`},
		{"log file relative", `{"network": {"log": {"file": "fw.log"}}}`, `p:1:30: network.log.file: "fw.log": want a clean absolute file path, such as /var/log/devbox/firewall.jsonl`},
		{"sandbox dotdot", `{"sandbox": {"denyRead": ["~/../x"]}}`, `p:1:27: sandbox.denyRead[0]: "~/../x": ".." is not allowed`},
		{"sandbox ~user", `{"sandbox": {"denyWrite": ["~bob/x"]}}`, `p:1:28: sandbox.denyWrite[0]: "~bob/x": "~user" is not supported: use "~/" for the agent's home`},
		{"writable root", `{"sandbox": {"allowWrite": ["/"]}}`, `p:1:29: sandbox.allowWrite[0]: "/": making the whole file system or home writable defeats the sandbox; list the directories you need`},
		{"column counts characters", "{/* é */ \"image\": {\"tag\": \"X\"}}", `p:1:27: image.tag: "X": repository names must be lower-case`},
		{"allow everything", `{"network": {"allow": ["0.0.0.0/0"]}}`, `p:1:24: network.allow[0]: "0.0.0.0/0": would allow every address; list the ranges you need`},
		{"NUL in a key", `{"a\u0000b": 1}`, `p:1:2: a\x00b: unknown key "a\x00b" at the top level (known keys: image, agent, network, sandbox, credentials)`},
		{"newline in a literal", "\"\n\"", `p:1:1: syntax error: invalid literal: "\x0a"`},
		{"NUL in a literal", "\"\x00\"", `p:1:1: syntax error: invalid literal: "\x00"`},
		{"too big", "{}" + strings.Repeat(" ", MaxFileSize), fmt.Sprintf("p: the file is %d bytes; a policy is at most %d", MaxFileSize+2, MaxFileSize)},
		{"invalid utf8", "{\"image\": {\"base\": \"\xff\"}}", `p:1:21: the file is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("p", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse accepted %q: %+v", tt.in, p)
			}
			if p != nil {
				t.Errorf("Parse returned a Policy with an error")
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n  %s\nwant:\n  %s", err, tt.want)
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	p, err := Parse("p", []byte(`{ /* nothing */ }`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Image.Base != DefaultBase || p.Image.User != (User{"dev", 1000, 1000}) || p.Agent.ClaudeCode != DefaultClaudeCode {
		t.Errorf("image/agent defaults: %+v %+v", p.Image, p.Agent)
	}
	if !p.Network.Log.Blocked || p.Network.Log.File != DefaultLogFile {
		t.Errorf("log defaults: %+v", p.Network.Log)
	}
	if p.Sandbox.Enabled || !slices.Equal(p.Sandbox.DenyRead, DefaultDenyRead) {
		t.Errorf("sandbox defaults: %+v", p.Sandbox)
	}
	if !p.Network.NoNetwork() {
		t.Errorf("the default policy allows network: %+v", p.Network)
	}
	if p.Path != "p" {
		t.Errorf("Path = %q", p.Path)
	}
}

func TestParseValues(t *testing.T) {
	in := `{
	  "image": {
	    "base": "127.0.0.1:5000/base/bookworm:1@sha256:` + strings.Repeat("0", 64) + `",
	    "user": {"name": "agent", "uid": 1234, "gid": 2345},
	    "packages": ["ripgrep", "git", "libc6-dev", "g++", "git"],
	    "tag": "registry.test:5000/team/dev:1.2.3",
	  },
	  "agent": {"claudeCode": "none"},
	  "network": {
	    "dns": {"upstream": ["192.0.2.53", "[2001:db8::53]:5353", "192.0.2.53:53"]},
	    "log": {"blocked": false, "file": "/var/log/fw.jsonl"},
	  },
	  "sandbox": {"enabled": true, "denyRead": ["~/.kube/", "~/.ssh"], "allowWrite": ["./build", "~/.cache"], "denyWrite": [".git/hooks"]},
	}`
	p, err := Parse("p", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if p.Image.User != (User{"agent", 1234, 2345}) {
		t.Errorf("user = %+v", p.Image.User)
	}
	if want := []string{"g++", "git", "libc6-dev", "ripgrep"}; !slices.Equal(p.Image.Packages, want) {
		t.Errorf("packages = %q, want %q", p.Image.Packages, want)
	}
	if p.Agent.ClaudeCode != ClaudeCodeNone {
		t.Errorf("claudeCode = %q", p.Agent.ClaudeCode)
	}
	var ups []string
	for _, u := range p.Network.DNS.Upstream {
		ups = append(ups, u.String())
	}
	if want := []string{"192.0.2.53:53", "[2001:db8::53]:5353"}; !slices.Equal(ups, want) {
		t.Errorf("upstream = %q, want %q (user order, folded)", ups, want)
	}
	if p.Network.Log.Blocked || p.Network.Log.File != "/var/log/fw.jsonl" {
		t.Errorf("log = %+v", p.Network.Log)
	}
	if want := append(slices.Clone(DefaultDenyRead), "~/.kube"); !slices.Equal(p.Sandbox.DenyRead, sortFold(want)) {
		t.Errorf("denyRead = %q: the defaults must stay and the user's entries be added", p.Sandbox.DenyRead)
	}
	if want := []string{"build", "~/.cache"}; !slices.Equal(p.Sandbox.AllowWrite, want) {
		t.Errorf("allowWrite = %q, want %q", p.Sandbox.AllowWrite, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.jsonc"))
	if !errors.Is(err, ErrNoPolicy) {
		t.Errorf("Load(missing) = %v, want ErrNoPolicy", err)
	}
	path := filepath.Join(dir, DefaultFileName)
	if err := os.WriteFile(path, []byte(`{"network": {"presets": ["npm"]},}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Path != path || !slices.Contains(p.Network.Allow, Destination{Kind: Host, Name: "registry.npmjs.org", Port: 443}) {
		t.Errorf("Load = %+v", p)
	}
	if err := os.WriteFile(path, []byte(`{"network": {"allow": ["*"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	var errs *Errors
	if !errors.As(err, &errs) || errors.Is(err, ErrNoPolicy) || !strings.HasPrefix(err.Error(), path+":1:24: ") {
		t.Errorf("Load(invalid) = %v", err)
	}
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	_, err := Find(root)
	if !errors.Is(err, ErrNoPolicy) || !strings.Contains(err.Error(), filepath.Join(root, ".devcontainer", DefaultFileName)+" and "+filepath.Join(root, DefaultFileName)) {
		t.Fatalf("Find(empty) = %v, want ErrNoPolicy naming both places", err)
	}
	rootFile := filepath.Join(root, DefaultFileName)
	os.WriteFile(rootFile, []byte("{}"), 0o644)
	if got, err := Find(root); err != nil || got != rootFile {
		t.Errorf("Find(root file only) = %q, %v", got, err)
	}
	// Both present: .devcontainer/ wins.
	dcFile := filepath.Join(root, ".devcontainer", DefaultFileName)
	os.MkdirAll(filepath.Dir(dcFile), 0o755)
	os.WriteFile(dcFile, []byte("{}"), 0o644)
	if got, err := Find(root); err != nil || got != dcFile {
		t.Errorf("Find(both) = %q, %v, want %q", got, err, dcFile)
	}
}
