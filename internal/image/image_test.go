package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/solver/pb"
	digest "github.com/opencontainers/go-digest"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/devbox-dev/devbox/internal/golden"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
)

const (
	testBaseDigest = "sha256:9a083bb9d9ef9f42f686c49a3db5eed1064ab61e866fc51b119aed8169dbb06f"
	// The real integrity of @anthropic-ai/claude-code-linux-x64@2.1.332.
	testIntegrity = "sha512-f4JWhzwYutJIHScC7/dYOPX6s28tt7ZADhsOi8zwOHq5fFPEuUeChh2NMfinSg0GrUckYxaeebC4h0DqiKzLcw=="
	testSHA512Hex = "7f8256873c18bad2481d2702eff75838f5fab36f2db7b6400e1b0e8bccf0387ab97c53c4b94782861d8d31f8a74a0d06ad472463169e79b0b88740ea88accb73"
)

// testPolicy parses testdata/policy.jsonc with agent.claudeCode = claude.
func testPolicy(claude string) *policy.Policy {
	raw, err := os.ReadFile("testdata/policy.jsonc")
	if err != nil {
		panic(err)
	}
	p, err := policy.Parse("testdata/policy.jsonc", bytes.ReplaceAll(raw, []byte("CLAUDE"), []byte(claude)))
	if err != nil {
		panic(err)
	}
	return p
}

func testLock(claude string) *policy.Lock {
	l := &policy.Lock{
		Version:         policy.LockVersion,
		Devbox:          "0.1.0-test",
		SourceDateEpoch: 1767225600,
		Base:            policy.LockedImage{Ref: "registry.test:5000/devbox/base:bookworm", Digest: testBaseDigest},
		ClaudeCode:      policy.LockedClaudeCode{Version: claude},
	}
	if claude != policy.ClaudeCodeNone {
		l.ClaudeCode.Platforms = map[string]policy.LockedPackage{
			"linux/amd64": {
				Package:   "@anthropic-ai/claude-code-linux-x64",
				Tarball:   "https://registry.npmjs.org/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-" + claude + ".tgz",
				Integrity: testIntegrity,
			},
		}
	}
	return l
}

func testSpec(claude string) Spec {
	return Spec{Policy: testPolicy(claude), Lock: testLock(claude), Platform: "linux/amd64", Source: "https://github.com/devbox-dev/devbox"}
}

// dumpGraph marshals the graph and renders every op as indented JSON with
// its digest and name: a readable form of what `buildctl debug dump-llb`
// prints.
func dumpGraph(t *testing.T, st llb.State) ([]byte, *llb.Definition) {
	t.Helper()
	def, err := st.Marshal(context.Background(), llb.LinuxAmd64)
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		Digest string          `json:"digest"`
		Name   string          `json:"name,omitempty"`
		Op     json.RawMessage `json:"op"`
	}
	var out []entry
	for _, dt := range def.Def {
		var op pb.Op
		if err := op.UnmarshalVT(dt); err != nil {
			t.Fatal(err)
		}
		dgst := digest.FromBytes(dt)
		js, err := protojson.Marshal(&op)
		if err != nil {
			t.Fatal(err)
		}
		// protojson's spacing is deliberately unstable; re-indent it.
		var v any
		if err := json.Unmarshal(js, &v); err != nil {
			t.Fatal(err)
		}
		stable, _ := json.Marshal(v)
		out = append(out, entry{Digest: dgst.String(), Name: def.Metadata[dgst].Description["llb.customname"], Op: stable})
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n'), def
}

func TestGraphGolden(t *testing.T) {
	for _, claude := range []string{"2.1.332", policy.ClaudeCodeNone} {
		t.Run(claude, func(t *testing.T) {
			st, err := Graph(testSpec(claude))
			if err != nil {
				t.Fatal(err)
			}
			dump, _ := dumpGraph(t, st)
			golden.Check(t, filepath.Join("testdata", "graph-claude-"+claude+".golden"), dump)
			s := string(dump)
			if !strings.Contains(s, "registry.test:5000/devbox/base@"+testBaseDigest) {
				t.Error("the graph does not pull the base by digest")
			}
			if got := strings.Contains(s, "claude-code-linux-x64"); got != (claude != policy.ClaudeCodeNone) {
				t.Errorf("graph mentions the Claude tarball: %v, want %v", got, claude != policy.ClaudeCodeNone)
			}
		})
	}
}

// A change to the network policy alone must not change the heavy image:
// every op of its graph, and so its cache key, stays the same; only the
// tail (the policy and Claude Code's managed settings, written by Assemble)
// differs.
func TestGraphNetworkChangeTouchesNothing(t *testing.T) {
	a := testSpec("2.1.332")
	b := testSpec("2.1.332")
	b.Policy.Sandbox.Enabled = true // Claude Code's settings then list the allowed names
	a.Policy.Sandbox.Enabled = true
	d, err := policy.ParseDestination("registry.npmjs.org:443")
	if err != nil {
		t.Fatal(err)
	}
	b.Policy.Network.Allow = append(b.Policy.Network.Allow, d)
	opsA := graphOps(t, a)
	opsB := graphOps(t, b)
	if !maps.Equal(opsA, opsB) {
		t.Errorf("a network-only change changed the heavy graph:\n%v\n%v", opsA, opsB)
	}
	if _, ok := opsA["[devbox] policy"]; ok {
		t.Error("the policy is in BuildKit's graph; it belongs to the tail")
	}
	a.BinaryDigest, b.BinaryDigest = "bin", "bin"
	ka, err := HeavyKey(context.Background(), a, false)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := HeavyKey(context.Background(), b, false)
	if ka != kb {
		t.Errorf("heavy keys %s and %s differ for a network-only change", ka, kb)
	}
	// The key follows what the heavy image is made of.
	c := testSpec("2.1.332")
	c.Policy.Sandbox.Enabled = true
	c.Policy.Image.Packages = append(c.Policy.Image.Packages, "vim")
	c.BinaryDigest = "bin"
	d2 := a
	d2.BinaryDigest = "other bin"
	for name, k := range map[string]func() (string, error){
		"package":    func() (string, error) { return HeavyKey(context.Background(), c, false) },
		"binary":     func() (string, error) { return HeavyKey(context.Background(), d2, false) },
		"timestamps": func() (string, error) { return HeavyKey(context.Background(), a, true) },
	} {
		if got, err := k(); err != nil || got == ka {
			t.Errorf("a %s change kept the heavy key (%v)", name, err)
		}
	}
	fa, _ := TailFiles(a)
	fb, _ := TailFiles(b)
	var changed []string
	for i := range fa {
		if !bytes.Equal(fa[i].Data, fb[i].Data) {
			changed = append(changed, fa[i].Path)
		}
	}
	if want := []string{ClaudeSettingsPath, layout.PolicyPath}; !slices.Equal(changed, want) {
		t.Errorf("tail files changed by a network-only change: %q, want %q", changed, want)
	}
	// And the tail is last: nothing is built on top of it.
	steps, _ := Steps(a)
	if last := steps[len(steps)-1]; last.Name != "policy" || !last.Tail {
		t.Errorf("last step is %q (tail %v), want the policy, in the tail", last.Name, last.Tail)
	}
}

func graphOps(t *testing.T, spec Spec) map[string]string {
	t.Helper()
	st, err := Graph(spec)
	if err != nil {
		t.Fatal(err)
	}
	_, def := dumpGraph(t, st)
	ops := map[string]string{}
	for _, dt := range def.Def {
		d := digest.FromBytes(dt)
		if name := def.Metadata[d].Description["llb.customname"]; name != "" {
			ops[name] = d.String()
		}
	}
	return ops
}

func TestDockerfileGolden(t *testing.T) {
	for _, claude := range []string{"2.1.332", policy.ClaudeCodeNone} {
		t.Run(claude, func(t *testing.T) {
			df, err := Dockerfile(testSpec(claude), "0.1.0-test")
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "Dockerfile-claude-"+claude+".golden"), df)
			s := string(df)
			for _, bad := range []string{"# syntax", "FROM debian", "docker.io", "--mount"} {
				if strings.Contains(s, bad) {
					t.Errorf("Dockerfile contains %q, which fails offline or on the classic builder", bad)
				}
			}
			if n := strings.Count(s, "\nFROM registry.test:5000/devbox/base@"+testBaseDigest); n == 0 {
				t.Error("Dockerfile does not build FROM the locked digest")
			}
		})
	}
}

func TestStepsValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(s *Spec)
		want string
	}{
		{"sudo", func(s *Spec) { s.Policy.Image.Packages = append(s.Policy.Image.Packages, "sudo") }, `"sudo" would give`},
		{"shell in package", func(s *Spec) { s.Policy.Image.Packages = []string{"git; rm -rf /"} }, "not a Debian package name"},
		{"root user", func(s *Spec) { s.Policy.Image.User.UID = 0 }, "must not be root"},
		{"dns uid", func(s *Spec) { s.Policy.Image.User.UID = layout.DNSUID }, "reserved for devbox-dns"},
		{"bad user name", func(s *Spec) { s.Policy.Image.User.Name = "Dev User" }, "not a valid user name"},
		{"reserved name", func(s *Spec) { s.Policy.Image.User.Name = "root" }, "reserved"},
		{"platform", func(s *Spec) { s.Platform = "linux/s390x" }, "not supported"},
		{"platform not locked", func(s *Spec) { s.Platform = "linux/arm64" }, "does not pin Claude Code for linux/arm64"},
		{"bad integrity", func(s *Spec) {
			p := s.Lock.ClaudeCode.Platforms["linux/amd64"]
			p.Integrity = "sha512-AAAA"
			s.Lock.ClaudeCode.Platforms["linux/amd64"] = p
		}, "not a valid sha512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSpec("2.1.332")
			tt.edit(&s)
			_, err := Steps(s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Steps = %v, want an error containing %q", err, tt.want)
			}
			if _, err := Graph(s); err == nil {
				t.Error("Graph accepted the spec Steps refused")
			}
		})
	}
}

func TestSteps(t *testing.T) {
	steps, err := Steps(testSpec("2.1.332"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	want := []string{"claude-fetch", "claude-verify", "packages", "accounts", "claude", "login-banner", "devbox", "claude-settings", "policy"}
	if !slices.Equal(names, want) {
		t.Fatalf("steps %q, want %q", names, want)
	}
	byName := map[string]Step{}
	for _, s := range steps {
		byName[s.Name] = s
	}
	if !strings.Contains(byName["claude-verify"].Script, "want="+testSHA512Hex) {
		t.Error("claude-verify does not check the lock's sha512 as hex")
	}
	if !strings.Contains(byName["packages"].Script, "install -y --no-install-recommends bash-completion bubblewrap ca-certificates curl git iproute2 ipset iptables jq less procps ripgrep socat unzip\n") {
		t.Errorf("packages script:\n%s", byName["packages"].Script)
	}
	for _, s := range steps {
		if s.Network != (s.Name == "packages") {
			t.Errorf("step %s: network %v; only apt may use the network", s.Name, s.Network)
		}
	}
	acc := byName["accounts"].Script
	for _, w := range []string{"useradd --uid 1000 --gid 1000 --create-home --home-dir /home/dev --shell /bin/bash dev",
		"--uid 998 --gid 998 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin devbox-dns",
		"-perm -4000", "chmod u-s,g-s", "sudo"} {
		if !strings.Contains(acc, w) {
			t.Errorf("accounts script lacks %q", w)
		}
	}
	// The banner script, written to a scratch path instead of
	// /etc/profile.d, must source cleanly under sh -e even when doctor
	// fails or is missing: a login shell must never die of it.
	banner := filepath.Join(t.TempDir(), "devbox.sh")
	script := strings.ReplaceAll(byName["login-banner"].Script, LoginBannerPath, banner)
	script = strings.ReplaceAll(script, "mkdir -p /etc/profile.d\n", "")
	if out, err := exec.Command("sh", "-eu", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("login-banner script: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(banner)
	if !strings.Contains(string(b), layout.BinaryPath+" doctor --quiet || true") {
		t.Errorf("%s does not run doctor --quiet:\n%s", LoginBannerPath, b)
	}
	fakeBin := strings.ReplaceAll(string(b), layout.BinaryPath, "/bin/false")
	if out, err := exec.Command("sh", "-e", "-c", fakeBin+"\necho shell-went-on").CombinedOutput(); err != nil || !strings.Contains(string(out), "shell-went-on") {
		t.Errorf("a failing doctor stops a login shell under -e: %v\n%s", err, out)
	}
	pol := byName["policy"]
	if pol.Dest != layout.PolicyPath || !json.Valid(pol.Data) {
		t.Errorf("policy step writes %s, valid JSON %v", pol.Dest, json.Valid(pol.Data))
	}
	// The Dockerfile form runs claude-settings' script; devbox's own build
	// writes its Data: the two must give the same file.
	cs := byName["claude-settings"]
	settings := filepath.Join(t.TempDir(), "managed-settings.json")
	script = strings.ReplaceAll(cs.Script, ClaudeSettingsPath, settings)
	script = strings.ReplaceAll(script, "mkdir -p "+filepath.Dir(ClaudeSettingsPath)+"\n", "")
	if out, err := exec.Command("sh", "-eu", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("claude-settings script: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(settings); !cs.Tail || cs.Dest != ClaudeSettingsPath || !bytes.Equal(got, cs.Data) {
		t.Errorf("claude-settings: the script writes %q, the tail %q to %s (tail %v)", got, cs.Data, cs.Dest, cs.Tail)
	}
}

func TestSHA512Hex(t *testing.T) {
	got, err := sha512Hex(testIntegrity)
	if err != nil || got != testSHA512Hex {
		t.Errorf("sha512Hex = %q, %v; want %q", got, err, testSHA512Hex)
	}
	for _, bad := range []string{"sha1-abcd", "sha512-!!!", "sha512-AAAA"} {
		if _, err := sha512Hex(bad); err == nil {
			t.Errorf("sha512Hex(%q) accepted", bad)
		}
	}
}

func TestMetadataLabel(t *testing.T) {
	md, err := Metadata(testPolicy("2.1.332"))
	if err != nil {
		t.Fatal(err)
	}
	var arr []map[string]any
	if err := json.Unmarshal([]byte(md), &arr); err != nil {
		t.Fatalf("label is not a JSON array: %v", err)
	}
	if len(arr) != 1 {
		t.Fatalf("label has %d entries, want 1", len(arr))
	}
	e := arr[0]
	if fmt.Sprint(e["capAdd"]) != "[NET_ADMIN NET_RAW]" || e["remoteUser"] != "dev" || e["containerUser"] != "root" ||
		e["entrypoint"] != layout.BinaryPath+" entrypoint" {
		t.Errorf("label entry %v", e)
	}
	if _, ok := e["runArgs"]; ok {
		t.Error("runArgs in image metadata is ignored by the Dev Containers CLI")
	}
}

func TestConfigJSON(t *testing.T) {
	b, err := ConfigJSON(testSpec("2.1.332"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var c imageConfig
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Created != "2026-01-01T00:00:00Z" {
		t.Errorf("created %q, want the lock's SOURCE_DATE_EPOCH", c.Created)
	}
	if c.Config.User != "root" || !slices.Equal(c.Config.Entrypoint, []string{"/usr/local/bin/devbox", "entrypoint", "--"}) ||
		!slices.Equal(c.Config.Cmd, []string{"sleep", "infinity"}) {
		t.Errorf("config %+v", c.Config)
	}
	if len(c.Config.Labels) != 0 {
		t.Errorf("the heavy image has labels %v; they follow the policy and belong to the tail", c.Config.Labels)
	}
	l, err := Labels(testSpec("2.1.332"), "0.1.0-test")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{MetadataLabel, LabelPolicy, LabelPolicyDigest, "org.opencontainers.image.created",
		"org.opencontainers.image.version", "org.opencontainers.image.source", "org.opencontainers.image.base.digest"} {
		if l[k] == "" {
			t.Errorf("label %s missing", k)
		}
	}
	if !slices.Contains(c.Config.Env, "DISABLE_AUTOUPDATER=1") {
		t.Error("the image does not disable Claude Code's updater")
	}
}

// TestHistory checks that the image history is a function of the spec and
// the base's config alone: the base's entries padded to one per base layer,
// then one per layer devbox adds, never BuildKit's description of how this
// daemon got the layer (a command, or "imported sha256:…" from a cache).
func TestHistory(t *testing.T) {
	spec := testSpec("2.1.332")
	steps, err := Steps(spec)
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, st := range steps {
		if st.Stage == "" && st.Kind != FetchStep && !st.Tail {
			own = append(own, VertexPrefix+st.Name)
		}
	}
	for _, tc := range []struct {
		name string
		base string
		// wantBase is the CreatedBy of the entries before devbox's.
		wantBase []string
	}{
		{"history per layer", `{"rootfs":{"diff_ids":["sha256:a","sha256:b"]},"history":[{"created_by":"one"},{"created_by":"empty","empty_layer":true},{"created_by":"two"}]}`,
			[]string{"one", "empty", "two"}},
		{"no history", `{"rootfs":{"diff_ids":["sha256:a"]}}`,
			[]string{"base layer 1 of " + spec.Lock.Base.Pinned()}},
		{"more entries than layers", `{"rootfs":{"diff_ids":["sha256:a"]},"history":[{"created_by":"one"},{"created_by":"extra"}]}`,
			[]string{"one", "extra"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := History(spec, []byte(tc.base))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			nonEmpty := 0
			for _, e := range h {
				got = append(got, e.CreatedBy)
				if !e.EmptyLayer {
					nonEmpty++
				}
			}
			want := append(slices.Clone(tc.wantBase), own...)
			if !slices.Equal(got, want) {
				t.Errorf("history %q, want %q", got, want)
			}
			var bc struct {
				RootFS struct {
					DiffIDs []string `json:"diff_ids"`
				} `json:"rootfs"`
			}
			json.Unmarshal([]byte(tc.base), &bc)
			if nonEmpty != len(bc.RootFS.DiffIDs)+len(own) {
				t.Errorf("%d non-empty entries for %d base layers and %d devbox layers", nonEmpty, len(bc.RootFS.DiffIDs), len(own))
			}
		})
	}
	if h, err := History(spec, nil); err != nil || h != nil {
		t.Errorf("History(nil base) = %v, %v; want no history (left to BuildKit)", h, err)
	}
	if _, err := History(spec, []byte("{")); err == nil {
		t.Error("a broken base config was accepted")
	}
}

func TestDockerQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{`plain`, `"plain"`},
		{`[{"a":"$HOME\n"}]`, `"[{\"a\":\"\$HOME\\n\"}]"`},
	}
	for _, tt := range tests {
		if got := dockerQuote(tt.in); got != tt.want {
			t.Errorf("dockerQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// The base's toolchain environment survives (a Go image's PATH and GOPATH),
// devbox's own variables win, and a base without a PATH gets devbox's.
func TestImageEnv(t *testing.T) {
	goBase := []string{"PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "GOLANG_VERSION=1.25.4", "GOPATH=/go", "LANG=en_US.ISO-8859-1"}
	got := ImageEnv(goBase)
	want := []string{goBase[0], "GOLANG_VERSION=1.25.4", "GOPATH=/go", "LANG=C.UTF-8", "DISABLE_AUTOUPDATER=1"}
	if !slices.Equal(got, want) {
		t.Errorf("ImageEnv(go base) = %q, want %q", got, want)
	}
	if got := ImageEnv(nil); !slices.Equal(got, Env) {
		t.Errorf("ImageEnv(nil) = %q, want %q", got, Env)
	}
}

// Two binaries are two local-source vertices: BuildKit merges vertices with
// one digest across concurrent solves, and a fixed ID once baked another
// client's binary into an image.
func TestGraphBinaryVertexPerBinary(t *testing.T) {
	a, b := testSpec("none"), testSpec("none")
	a.BinaryDigest, b.BinaryDigest = "aaaa", "bbbb"
	oa, ob := graphOps(t, a), graphOps(t, b)
	name := VertexPrefix + "devbox binary"
	if oa[name] == "" || oa[name] == ob[name] {
		t.Errorf("the binary's local source is %q for one binary and %q for another", oa[name], ob[name])
	}
}

// TestRunLinesParse: the Dockerfile (the Feature's and `devbox init`'s
// build path) joins each RunStep's lines with "; " into one RUN command, so
// each line must be a whole command: a quoted awk program over several
// lines builds with BuildKit's LLB and breaks only there (it did). sh -n
// parses the joined command, and each line alone must not leave a quote or
// a $( open (an if/for line alone is incomplete, which is fine).
func TestRunLinesParse(t *testing.T) {
	specs := map[string]Spec{"default": testSpec("2.1.332")}
	perl := testSpec("2.1.332")
	perl.Policy.Image.Packages = []string{"perl"}
	specs["perl listed"] = perl
	for name, spec := range specs {
		steps, err := Steps(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if s.Kind != RunStep {
				continue
			}
			cmd := strings.ReplaceAll(runLine(s.Script), " \\\n    ", " ")
			if out, err := exec.Command("sh", "-n", "-c", cmd).CombinedOutput(); err != nil {
				t.Errorf("%s: step %s: the Dockerfile's RUN does not parse: %v\n%s\n%s", name, s.Name, err, out, cmd)
			}
			for i, l := range strings.Split(s.Script, "\n") {
				out, _ := exec.Command("sh", "-n", "-c", l).CombinedOutput()
				if o := string(out); strings.Contains(o, "Unterminated") || strings.Contains(o, "Missing") {
					t.Errorf("%s: step %s, line %d is not a whole command (%s): %s", name, s.Name, i+1, strings.TrimSpace(o), l)
				}
			}
		}
	}
}
