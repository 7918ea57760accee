package baseline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolve is the entrypoint's choice: the repository's mounted policy
// when it narrows the baseline, an error (the fence then fails closed)
// when it widens it, the baked policy when nothing is mounted.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base, err := Load(filepath.Join("testdata", "baseline.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	norm, err := base.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	baked := write("policy.json", norm)
	baseline := write("baseline.json", norm)
	missing := filepath.Join(dir, "none")

	r, err := Resolve(baked, baseline, missing)
	if err != nil || r.Policy.Path != baked {
		t.Fatalf("no repository policy: got %v, %v; want the baked policy", r, err)
	}
	repo := write("repo.jsonc", read("narrow.jsonc"))
	r, err = Resolve(baked, baseline, repo)
	if err != nil || r.Policy.Path != repo {
		t.Fatalf("a narrowing repository policy: got %v, %v; want it applied", r, err)
	}
	for _, hostile := range []string{"hostile.jsonc"} {
		repo := write("repo.jsonc", read(hostile))
		_, err := Resolve(baked, baseline, repo)
		if err == nil {
			t.Fatalf("%s was accepted", hostile)
		}
		for _, want := range []string{"repo.jsonc:6:7", `exceeds baseline network.allow "*.dev.corp.test:443"`, "the fence is not applied"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error does not say %q:\n%v", hostile, want, err)
			}
		}
	}
	// Without a baseline file, the baked policy is the ceiling.
	narrowBaked := write("narrow.json", read("narrow.jsonc"))
	if _, err := Resolve(narrowBaked, missing, write("repo.jsonc", read("baseline.jsonc"))); err == nil {
		t.Fatal("a repository policy wider than the baked one was accepted without a baseline")
	}
	// A baked policy wider than the image's baseline is refused too.
	if _, err := Resolve(write("wide.json", read("hostile.jsonc")), baseline, missing); err == nil {
		t.Fatal("a baked policy wider than the baseline was accepted")
	}
	// A baseline that does not load fails closed.
	if _, err := Resolve(baked, write("bad.json", []byte("{")), missing); err == nil {
		t.Fatal("an unreadable baseline was accepted")
	}
}

func TestFromLabel(t *testing.T) {
	base, err := Load(filepath.Join("testdata", "baseline.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	norm, _ := base.Normalize()
	if _, err := FromLabel(string(norm), Digest(norm)); err != nil {
		t.Fatal(err)
	}
	if _, err := FromLabel(strings.Replace(string(norm), "2.1.332", "2.1.333", 1), Digest(norm)); err == nil {
		t.Fatal("a label that does not match its digest was accepted")
	}
}

// TestApplied: the one lookup `devbox run`, the gateway and doctor use.
// The policy the entrypoint recorded wins over the baked one; a mounted
// repository policy without a record is an error (its narrowing would be
// lost), never a silent fall back to the baked policy.
func TestApplied(t *testing.T) {
	dir := t.TempDir()
	baked := filepath.Join(dir, "policy.json")
	repo := filepath.Join(dir, "repo.policy.jsonc")
	rec := filepath.Join(dir, "run", "policy.json")
	base, err := Load(filepath.Join("testdata", "baseline.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	norm, _ := base.Normalize()
	os.WriteFile(baked, norm, 0o644)
	p, err := applied(rec, repo, baked)
	if err != nil || len(p.Credentials.Git[0].Repos) != 2 {
		t.Fatalf("no record, no repository policy: %v, %v; want the baked policy", p, err)
	}
	narrow, _ := os.ReadFile(filepath.Join("testdata", "narrow.jsonc"))
	os.WriteFile(repo, narrow, 0o644)
	if _, err := applied(rec, repo, baked); err == nil || !strings.Contains(err.Error(), "has not recorded") {
		t.Fatalf("a repository policy without a record: %v; want an error", err)
	}
	r, err := Resolve(baked, filepath.Join(dir, "none"), repo)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteApplied(rec, r.Policy); err != nil {
		t.Fatal(err)
	}
	p, err = applied(rec, repo, baked)
	if err != nil || len(p.Credentials.Git[0].Repos) != 1 || len(p.Sandbox.AllowWrite) != 1 {
		t.Fatalf("recorded: %+v, %v; want the repository's narrowed routes and sandbox", p, err)
	}
	os.Chmod(rec, 0o666)
	if _, err := applied(rec, repo, baked); err == nil {
		t.Fatal("a record others may write was accepted")
	}
}
