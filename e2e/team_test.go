package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/entrypoint"
)

// teamBaseline is the team's baseline: the sample's service plus a
// wildcard the repositories below do not use, and one deny.
func teamBaseline(e env, tag string) string {
	return fmt.Sprintf(`// the team's baseline
{
  "image": {"base": %q, "user": {"name": "dev", "uid": 1000, "gid": 1000}, "tag": %q},
  "agent": {"claudeCode": "none"},
  "network": {
    "allow": ["allowed.test:8080", "*.team.test:443"],
    "deny": ["secret.team.test"],
    "log": {"blocked": true},
  },
}
`, e.base, tag)
}

// teamRepo is sampleRepo on the team image, its policy keeping the
// baseline's deny (a repository may only add denies) with allow as its
// allow list.
func teamRepo(t *testing.T, e env, w *world, image, allow string) string {
	t.Helper()
	repo := sampleRepo(t, e, w, image)
	pol := filepath.Join(repo, ".devcontainer", "devbox.policy.jsonc")
	raw, _ := os.ReadFile(pol)
	const old = `"allow": ["allowed.test:8080"],`
	if !strings.Contains(string(raw), old) {
		t.Fatalf("the sample policy changed shape:\n%s", raw)
	}
	os.WriteFile(pol, []byte(strings.Replace(string(raw), old, `"allow": [`+allow+`],
    "deny": ["secret.team.test", "other.test"],`, 1)), 0o644)
	return repo
}

// TestTeamBaseline: a team image built with --baseline and pushed; a
// repository that narrows the baseline validates (the baseline read from
// the image's label in the registry) and comes up fenced with its own
// policy; one that widens it fails validate and, at devcontainer up, the
// entrypoint refuses to fence, naming the baseline entry, and egress stays
// denied.
func TestTeamBaseline(t *testing.T) {
	e := setup(t)
	w := startWorld(t, e.d, e.base, e.worldd)

	teamDir := t.TempDir()
	tag := e.registry + "/devbox/e2e-team:" + w.Nonce
	os.WriteFile(filepath.Join(teamDir, "baseline.jsonc"), []byte(teamBaseline(e, tag)), 0o644)
	out := run(t, teamDir, []string{"BUILDKIT_HOST=" + e.buildkit}, e.devbox, "build", "--push", "--progress", "plain",
		"--policy", "baseline.jsonc", "--baseline", "baseline.jsonc")
	image := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if !strings.Contains(image, "@sha256:") {
		t.Fatalf("devbox build --push printed no REPO@sha256 reference:\n%s", out)
	}
	t.Logf("team image %s", image)

	t.Run("narrowing repository", func(t *testing.T) {
		repo := teamRepo(t, e, w, image, `"allowed.test:8080"`) // narrower: no *.team.test, one more deny
		out := run(t, repo, nil, e.devbox, "policy", "validate")
		if !strings.Contains(out, "ok (within baseline "+image) {
			t.Fatalf("validate did not check against the image's baseline:\n%s", out)
		}
		id := devcontainerUp(t, e, repo)
		requireFenced(t, e.d, id, "")
		got, err := e.d.Command(t.Context(), "exec", id, "devbox", "policy", "explain", "--baseline", "/etc/devbox/baseline.json", "/etc/devbox/repo.policy.jsonc").CombinedOutput()
		if err != nil || !strings.Contains(string(got), "within baseline allowed.test:8080") || !strings.Contains(string(got), "*.team.test:443") {
			t.Errorf("explain in the container: %v\n%s", err, got)
		}
	})

	t.Run("widening repository", func(t *testing.T) {
		repo := teamRepo(t, e, w, image, `"allowed.test"`) // any port: wider than allowed.test:8080
		want := `exceeds baseline network.allow "allowed.test:8080"`
		out, err := runErr(repo, nil, e.devbox, "policy", "validate")
		if err == nil || !strings.Contains(err.Error(), ".devcontainer/devbox.policy.jsonc:") || !strings.Contains(err.Error(), want) {
			t.Fatalf("validate of a widening policy: %v\n%s", err, out)
		}
		id := devcontainerUp(t, e, repo)
		st := fenceStatus(t, e.d, id, "")
		if st.State != entrypoint.Failed || !strings.Contains(st.Reason, want) {
			t.Fatalf("fence state %q, reason %q; want failed naming %s", st.State, st.Reason, want)
		}
		t.Logf("entrypoint refused: %s", st.Reason)
		// Deny-all: not even the baseline's service is reachable.
		if out, err := e.d.Command(t.Context(), "exec", "-u", "1000", id, "bash", "-c", "exec 3<>/dev/tcp/"+w.W1+"/8080").CombinedOutput(); err == nil {
			t.Errorf("egress is open after the refusal: %s", out)
		}
	})
}
