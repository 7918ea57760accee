package pin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/devcontainer"
	"github.com/devbox-dev/devbox/internal/policy"
)

// npmServer answers every package document with a sha512 integrity and
// counts the requests.
func npmServer(t *testing.T, hits *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		// /@scope%2fname/VERSION
		parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
		pkg := strings.Replace(parts[0], "%2f", "/", 1)
		json.NewEncoder(w).Encode(map[string]any{
			"name": pkg, "version": parts[1],
			"dist": map[string]string{"integrity": "sha512-" + pkg, "tarball": "http://npm.test/" + pkg + ".tgz"},
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

func writePolicy(t *testing.T, dir, base, claude string) *policy.Policy {
	t.Helper()
	path := filepath.Join(dir, policy.DefaultFileName)
	src := fmt.Sprintf(`{"image": {"base": %q}, "agent": {"claudeCode": %q}}`, base, claude)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEnsure(t *testing.T) {
	reg := devboxtest.NewRegistry(t)
	d1, d2 := devboxtest.PushRandom(t, reg+"/base:one"), devboxtest.PushRandom(t, reg+"/base:two")
	var hits atomic.Int32
	var notes []string
	epoch := int64(1767225600)
	o := Options{Devbox: "1.0.0-test", NPMRegistry: npmServer(t, &hits), SourceDateEpoch: &epoch,
		Logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }}
	ctx := context.Background()
	dir := t.TempDir()
	p := writePolicy(t, dir, reg+"/base:one", "2.1.332")

	if _, err := Ensure(ctx, p, []string{"linux/amd64"}, true, o); err == nil || !strings.Contains(err.Error(), "--frozen") {
		t.Fatalf("Ensure frozen without a lock = %v, want a --frozen error", err)
	}
	l, err := Ensure(ctx, p, []string{"linux/amd64"}, false, o)
	if err != nil {
		t.Fatal(err)
	}
	if l.Base.Digest != d1 || l.Devbox != "1.0.0-test" || l.SourceDateEpoch != epoch {
		t.Errorf("lock = %+v", l)
	}
	// Both default platforms are pinned, whatever was asked for.
	for _, plat := range DefaultPlatforms {
		if lp, ok := l.ClaudeCode.Platforms[plat]; !ok || !strings.HasPrefix(lp.Integrity, "sha512-@anthropic-ai/claude-code-linux-") {
			t.Errorf("Claude Code for %s = %+v", plat, lp)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "no ") {
		t.Errorf("notes = %q, want one saying there was no lock", notes)
	}
	onDisk, err := policy.ReadLock(policy.LockPath(p.Path))
	if err != nil || onDisk.Base.Digest != d1 {
		t.Fatalf("lock on disk = %+v, %v", onDisk, err)
	}

	// A current lock is used as it is: no registry, no npm.
	before := hits.Load()
	o.SourceDateEpoch = nil
	if _, err := Ensure(ctx, p, []string{"linux/arm64"}, true, o); err != nil {
		t.Fatalf("Ensure frozen with a current lock: %v", err)
	}
	if hits.Load() != before || len(notes) != 1 {
		t.Errorf("a current lock was resolved again (%d npm requests, notes %q)", hits.Load()-before, notes)
	}

	// Moving the base makes it stale: relocked, keeping the epoch.
	p = writePolicy(t, dir, reg+"/base:two", "2.1.332")
	if _, err := Ensure(ctx, p, nil, true, o); err == nil || !strings.Contains(err.Error(), "image.base") {
		t.Fatalf("Ensure frozen with a stale lock = %v", err)
	}
	l, err = Ensure(ctx, p, nil, false, o)
	if err != nil {
		t.Fatal(err)
	}
	if l.Base.Digest != d2 || l.SourceDateEpoch != epoch {
		t.Errorf("relocked = %+v, want base %s and epoch %d kept", l, d2, epoch)
	}
	if len(notes) != 2 || !strings.Contains(notes[1], "updating it") {
		t.Errorf("notes = %q", notes)
	}
}

func TestRelock(t *testing.T) {
	reg := devboxtest.NewRegistry(t)
	d := devboxtest.PushRandom(t, reg+"/base:one")
	dir := t.TempDir()
	p := writePolicy(t, dir, reg+"/base:one", policy.ClaudeCodeNone)
	os.WriteFile(policy.LockPath(p.Path), []byte("not json"), 0o644)
	var notes []string
	t.Setenv("SOURCE_DATE_EPOCH", "42")
	path, err := Relock(context.Background(), p, DefaultPlatforms, Options{Logf: func(f string, a ...any) { notes = append(notes, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := policy.ReadLock(path)
	if err != nil || l.Base.Digest != d || l.SourceDateEpoch != 42 || l.ClaudeCode.Platforms != nil {
		t.Fatalf("lock = %+v, %v", l, err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "unreadable") {
		t.Errorf("notes = %q", notes)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := Resolve(context.Background(), p, nil, nil, Options{}); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("a bad SOURCE_DATE_EPOCH = %v", err)
	}
	p.Image.Base = ""
	if _, err := Resolve(context.Background(), p, nil, nil, Options{}); err == nil || !strings.Contains(err.Error(), "nothing to lock") {
		t.Errorf("no base = %v", err)
	}
}

// TestInitLocked: a repository with a policy and no lock gets the lock and
// the Dockerfile in one run.
func TestInitLocked(t *testing.T) {
	reg := devboxtest.NewRegistry(t)
	devboxtest.PushRandom(t, reg+"/base:one")
	root := t.TempDir()
	bin := fakeLinuxBinary(t)
	opts := devcontainer.InitOptions{Root: root, Binary: bin, Platform: "linux/amd64", Version: "1.0.0-test"}
	// Without a lock the build files wait.
	first, err := devcontainer.PlanInit(opts)
	if err != nil || !pending(first) {
		t.Fatalf("PlanInit = %v, %v: want a pending Dockerfile", first, err)
	}
	// An existing policy is locked before Init checks the build. (A new
	// one gets the template's base, a real registry: not tested here.)
	os.MkdirAll(filepath.Join(root, devcontainer.Dir), 0o755)
	writePolicy(t, filepath.Join(root, devcontainer.Dir), reg+"/base:one", policy.ClaudeCodeNone)
	res, err := InitLocked(context.Background(), opts, Options{Devbox: "1.0.0-test"})
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]devcontainer.Status{}
	for _, r := range res {
		st[r.Path] = r.Status
	}
	if st[devcontainer.DockerfileFile] != devcontainer.Created || st[devcontainer.PolicyFile] != devcontainer.Kept {
		t.Errorf("statuses = %v", st)
	}
	if _, err := os.Stat(filepath.Join(root, devcontainer.LockFile)); err != nil {
		t.Errorf("no lock: %v", err)
	}
}

// TestInitLockedFailsClean: when the lock cannot be resolved, a new
// repository's init --lock leaves the directory as it was: the user's
// devcontainer.json unpatched, no policy, no binary, no Dockerfile.
func TestInitLockedFailsClean(t *testing.T) {
	root := t.TempDir()
	bin := fakeLinuxBinary(t)
	dc := filepath.Join(root, devcontainer.Dir)
	os.MkdirAll(dc, 0o755)
	user := []byte("// mine\n{\"name\": \"app\"}\n")
	cfg := filepath.Join(root, devcontainer.ConfigFile)
	if err := os.WriteFile(cfg, user, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := devcontainer.InitOptions{Root: root, Binary: bin, Platform: "linux/amd64", Version: "1.0.0-test"}
	// A cancelled context: resolving fails before anything is sent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := InitLocked(ctx, opts, Options{Devbox: "1.0.0-test", NPMRegistry: "http://127.0.0.1:1/"})
	if err == nil || !strings.Contains(err.Error(), "init --lock") {
		t.Fatalf("InitLocked with no registry access: %v, want the lock's error", err)
	}
	t.Logf("error: %v", err)
	ents, _ := os.ReadDir(dc)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != filepath.Base(cfg) {
		t.Errorf(".devcontainer holds %v after a failed init, want only the user's devcontainer.json", names)
	}
	got, _ := os.ReadFile(cfg)
	if string(got) != string(user) {
		t.Errorf("devcontainer.json = %q, want it restored to %q", got, user)
	}
	if fi, err := os.Stat(cfg); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("devcontainer.json mode: %v %v", fi.Mode(), err)
	}
	// In an empty repository the directory itself goes too.
	empty := t.TempDir()
	opts.Root = empty
	if _, err := InitLocked(ctx, opts, Options{Devbox: "1.0.0-test", NPMRegistry: "http://127.0.0.1:1/"}); err == nil || !strings.Contains(err.Error(), "init --lock") {
		t.Fatalf("InitLocked with no registry access: %v, want the lock's error", err)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Errorf("empty repository holds %v after a failed init", ents)
	}
}

// fakeLinuxBinary is an ELF header for linux/amd64: all init checks of the
// devbox binary it copies.
func fakeLinuxBinary(t *testing.T) string {
	bin := filepath.Join(t.TempDir(), "devbox")
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01")
	hdr[18] = 62 // EM_X86_64
	if err := os.WriteFile(bin, hdr, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
