package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/policy"
)

// bothPolicies makes the current directory a repository with a policy in
// .devcontainer/ and another at the root, telling them apart by their
// base image and their sandbox.denyRead, and returns the one every
// command must read (policy.Find's order).
func bothPolicies(t *testing.T, base func(which string) string) string {
	t.Chdir(t.TempDir())
	for _, which := range []string{"devcontainer", "root"} {
		path := policy.DefaultFileName
		if which == "devcontainer" {
			path = filepath.Join(".devcontainer", policy.DefaultFileName)
		}
		writeFile(t, path, `{
  "image": {"base": "`+base(which)+`"},
  "agent": {"claudeCode": "none"},
  "sandbox": {"enabled": true, "denyRead": ["~/secret-of-`+which+`"]},
}
`)
	}
	return filepath.Join(".devcontainer", policy.DefaultFileName)
}

func noBase(string) string { return "registry.test/base:1" }

func TestPolicyLookupValidate(t *testing.T) {
	want := bothPolicies(t, noBase)
	out, errOut, err := runDevbox(t, "policy", "validate")
	if err != nil || out != want+": ok\n" {
		t.Errorf("validate = %q, %v (%s); want %s checked", out, err, errOut, want)
	}
}

func TestPolicyLookupExplain(t *testing.T) {
	want := bothPolicies(t, noBase)
	out, errOut, err := runDevbox(t, "policy", "explain", "--json")
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, errOut)
	}
	var ex struct{ File string }
	if err := json.Unmarshal([]byte(out), &ex); err != nil || ex.File != want {
		t.Errorf("explain read %q (%v), want %s", ex.File, err, want)
	}
}

func TestPolicyLookupRun(t *testing.T) {
	bothPolicies(t, noBase)
	out, errOut, err := runDevbox(t, "run", "--print-claude-settings")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "secret-of-devcontainer") || strings.Contains(out, "secret-of-root") {
		t.Errorf("run read the wrong policy: %s", out)
	}
}

func TestPolicyLookupLockAndBuild(t *testing.T) {
	reg := devboxtest.NewRegistry(t)
	digests := map[string]string{}
	for _, which := range []string{"devcontainer", "root"} {
		digests[which] = devboxtest.PushRandom(t, reg+"/"+which+":1")
	}
	want := bothPolicies(t, func(which string) string { return reg + "/" + which + ":1" })
	wantLock := policy.LockPath(want)

	// build --frozen reads the policy, then stops at its missing lock,
	// naming it: no BuildKit is reached.
	_, _, err := runDevbox(t, "build", "--frozen")
	if err == nil || !strings.Contains(err.Error(), wantLock) {
		t.Errorf("build --frozen = %v, want an error about %s", err, wantLock)
	}

	out, errOut, err := runDevbox(t, "lock")
	if err != nil || out != wantLock+"\n" {
		t.Fatalf("lock = %q, %v (%s); want %s", out, err, errOut, wantLock)
	}
	l, err := policy.ReadLock(wantLock)
	if err != nil || l.Base.Digest != digests["devcontainer"] {
		t.Errorf("lock pins %+v (%v), want the .devcontainer policy's base %s", l, err, digests["devcontainer"])
	}
}
