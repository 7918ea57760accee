package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/entrypoint"
)

// teamBaseline is the team's baseline: the sample's service plus a
// wildcard the repositories below do not use, one deny, two credential
// routes under the wildcard and a sandbox deny.
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
  "credentials": {"http": [
    {"host": "hooks.team.test", "header": "X-Key", "value": "${secret}", "secret": "hooks"},
    {"host": "api.team.test", "header": "X-Key", "value": "${secret}", "secret": "api"},
  ]},
  "sandbox": {"denyWrite": ["locked.txt"]},
}
`, e.base, tag)
}

// teamNarrowing is what the narrowing repository adds to its policy: one
// of the baseline's two credential routes, and one more sandbox deny.
const teamNarrowing = `  "credentials": {"http": [{"host": "hooks.team.test", "header": "X-Key", "value": "${secret}", "secret": "hooks"}]},
  "sandbox": {"denyWrite": ["locked.txt", "notes.txt"]},
`

// teamRepo is sampleRepo on the team image, its policy keeping the
// baseline's deny (a repository may only add denies) with allow as its
// allow list, and extra (top-level members) added.
func teamRepo(t *testing.T, e env, w *world, image, allow, extra string) string {
	t.Helper()
	repo := sampleRepo(t, e, w, image)
	pol := filepath.Join(repo, ".devcontainer", "devbox.policy.jsonc")
	raw, _ := os.ReadFile(pol)
	const old = `"allow": ["allowed.test:8080"],`
	if !strings.Contains(string(raw), old) {
		t.Fatalf("the sample policy changed shape:\n%s", raw)
	}
	src := strings.Replace(string(raw), old, `"allow": [`+allow+`],
    "deny": ["secret.team.test", "other.test"],`, 1)
	end := strings.LastIndex(src, "}")
	src = src[:end] + extra + src[end:]
	os.WriteFile(pol, []byte(src), 0o644)
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
		// Narrower: no *.team.test but the kept route's host, one more
		// deny, one credential route of two, one more sandbox deny.
		repo := teamRepo(t, e, w, image, `"allowed.test:8080", "hooks.team.test:443"`, teamNarrowing)
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
		// The repository's narrowing applies beyond the firewall: the
		// credential gateway serves the one route it kept (doctor asks the
		// gateway), and devbox run's plan keeps notes.txt read-only.
		agent := func(args ...string) string {
			ws := "/workspaces/" + filepath.Base(repo)
			out, _ := e.d.Command(t.Context(), append([]string{"exec", "-u", "1000", "-w", ws, "-e", "HOME=/home/dev", id}, args...)...).CombinedOutput()
			return string(out)
		}
		doc := agent("devbox", "doctor", "--json", "--quiet")
		var rep struct {
			Findings []struct{ Check, Level, Detail string } `json:"findings"`
		}
		if err := json.Unmarshal([]byte(doc), &rep); err != nil {
			t.Fatalf("devbox doctor --json: %v\n%s", err, doc)
		}
		var routes []string
		for _, f := range rep.Findings {
			if strings.HasPrefix(f.Check, "credentials ") {
				routes = append(routes, f.Check)
			}
		}
		if len(routes) != 1 || !strings.Contains(routes[0], "hooks.team.test") {
			t.Errorf("the gateway's routes %q; want the repository's one route, hooks.team.test:\n%s", routes, doc)
		}
		plan := agent("devbox", "run", "--explain", "--", "true")
		if !strings.Contains(plan, "/notes.txt") || !strings.Contains(plan, "/locked.txt") {
			t.Errorf("devbox run's plan lacks the repository's denyWrite notes.txt (or the baseline's locked.txt):\n%s", plan)
		}
	})

	t.Run("widening repository", func(t *testing.T) {
		repo := teamRepo(t, e, w, image, `"allowed.test"`, "") // any port: wider than allowed.test:8080
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
