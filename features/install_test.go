package features

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/layout"
)

// TestInstallRejectsBadOptions runs install.sh with hostile option values:
// each must stop the build with a message naming the option, before
// anything is installed (validation runs first, so this needs no root).
func TestInstallRejectsBadOptions(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"ALLOW=a.test;touch /tmp/x"}, "option allow"},
		{[]string{"ALLOW=a.test$(id)"}, "option allow"},
		{[]string{"ALLOW=a\x01b.test"}, "option allow"},
		{[]string{"ALLOW=a b.test"}, "option allow"},
		{[]string{"ALLOW=*"}, `"*" would allow everything`},
		{[]string{"ALLOW=*.com"}, "two labels after"},
		{[]string{"ALLOW=a.test,,b.test"}, "empty entry"},
		{[]string{"PRESETS=anthropic,evil"}, `unknown preset "evil"`},
		{[]string{"CLAUDECODE=latest"}, "not an exact X.Y.Z"},
		{[]string{"CLAUDECODE=1.2"}, "not an exact X.Y.Z"},
		{[]string{"CLAUDECODE=1.2.3.4"}, "not an exact X.Y.Z"},
		{[]string{"CLAUDECODE=2.1.332"}, "not pinned in this feature package"},
		{[]string{"SANDBOX=yes"}, "option sandbox"},
		{[]string{"POLICYFILE=../../etc/shadow"}, "option policyFile"},
		{[]string{"POLICYFILE=/etc/shadow"}, "option policyFile"},
		// Valid options get past validation and stop at the missing payload.
		{[]string{"ALLOW=api.example.test:443,10.0.0.0/8,*.svc.example.test"}, "no devbox binary"},
	}
	for _, tt := range tests {
		cmd := exec.Command("sh", "src/devbox/install.sh")
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, tt.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%q: err %v, output %q, want %q", tt.env, err, out, tt.want)
		}
	}
}

// claudeTarball is an npm-style tarball holding package/claude.
func claudeTarball(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	body := []byte("#!/bin/sh\necho claude\n")
	if err := tw.WriteHeader(&tar.Header{Name: "package/claude", Mode: 0o755, Size: int64(len(body))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(body)
	tw.Close()
	gz.Close()
	return b.Bytes()
}

// featureBuildDir lays out the feature as the CLI does at build time:
// install.sh, payload/ with claude-code.pins (pins: version → sha512 of a
// local tarball, by file:// URL) and devcontainer-features.env holding
// envFile verbatim, as the CLI writes NAME="value" lines unescaped.
func featureBuildDir(t *testing.T, envFile string, pinSum string) string {
	t.Helper()
	dir := t.TempDir()
	install, err := os.ReadFile("src/devbox/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "payload"), 0o755)
	tgz := filepath.Join(dir, "claude.tgz")
	os.WriteFile(tgz, claudeTarball(t), 0o644)
	var pins strings.Builder
	for _, arch := range []string{"amd64", "arm64"} {
		fmt.Fprintf(&pins, "2.1.332 %s %s file://%s\n", arch, pinSum, tgz)
	}
	sum := sha256.Sum256([]byte(pins.String()))
	for name, data := range map[string]string{
		"install.sh":                           string(install),
		"payload/claude-code.pins":             pins.String(),
		"payload/SHA256SUMS":                   hex.EncodeToString(sum[:]) + "  claude-code.pins\n",
		"devcontainer-features.env":            envFile,
		"../devcontainer-features.builtin.env": "_CONTAINER_USER=root\n_REMOTE_USER=dev\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestInstallLikeTheCLI runs install.sh the way the CLI's generated
// wrapper does (source the env files with set -a, then run install.sh),
// with a NUL byte, shell metacharacters, an unknown version, a tarball
// that does not match its pin, and one that does.
func TestInstallLikeTheCLI(t *testing.T) {
	good := sha512.Sum512(claudeTarball(t))
	goodSum := hex.EncodeToString(good[:])
	badSum := strings.Repeat("ab", 64)
	tests := []struct {
		name, env, sum, want string
	}{
		{"NUL byte", "ALLOW=\"a\x00b.test\"\n", goodSum, "contains a NUL byte"},
		{"semicolon", "ALLOW=\"a.test;touch pwned\"\n", goodSum, "option allow"},
		{"pipe in presets", "PRESETS=\"npm|id\"\n", goodSum, "option presets"},
		{"unknown version", "CLAUDECODE=\"9.9.9\"\n", goodSum, "9.9.9 is not pinned in this feature package for linux/"},
		{"pinned versions listed", "CLAUDECODE=\"9.9.9\"\n", goodSum, "(pinned: 2.1.332"},
		{"tarball does not match", "CLAUDECODE=\"2.1.332\"\n", badSum, "does not match the pinned sha512"},
		// A matching tarball is unpacked, and the build goes on to the
		// devbox binary, which this test payload lacks.
		{"tarball matches", "CLAUDECODE=\"2.1.332\"\n", goodSum, "no devbox binary"},
	}
	for _, tt := range tests {
		dir := featureBuildDir(t, tt.env, tt.sum)
		cmd := exec.Command("sh", "-c", "set -e; set -a; . ../devcontainer-features.builtin.env; . ./devcontainer-features.env; set +a; ./install.sh")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%s: err %v, output %q, want %q", tt.name, err, out, tt.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Errorf("%s: a metacharacter ran a command", tt.name)
		}
	}
}

// TestInstallAccounts: install.sh is shell, so it cannot import
// internal/layout; its account list must equal layout's, the one source of
// the daemons' names and uids.
func TestInstallAccounts(t *testing.T) {
	src, err := os.ReadFile("src/devbox/install.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^for acct in ([^;]*); do$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("install.sh has no `for acct in …; do` account list")
	}
	want := fmt.Sprintf("%s:%d %s:%d %s:%d", layout.DNSUser, layout.DNSUID, layout.GateUser, layout.GateUID, layout.GatewayUser, layout.GatewayUID)
	if got := string(m[1]); got != want {
		t.Errorf("install.sh creates the accounts %q, internal/layout has %q", got, want)
	}
	if out, err := exec.Command("sh", "-n", "src/devbox/install.sh").CombinedOutput(); err != nil {
		t.Errorf("sh -n install.sh: %v\n%s", err, out)
	}
}
