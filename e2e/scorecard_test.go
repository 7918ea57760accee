package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/devbox-dev/devbox/internal/devboxtest"
	"github.com/devbox-dev/devbox/internal/escape"
	"github.com/devbox-dev/devbox/internal/gitaudit"
	"github.com/devbox-dev/devbox/internal/testworld"
)

// The scorecard's rows (docs/scorecard.md). CI runs the control and devbox
// default; DEVBOX_SCORECARD_ROWS=all (scripts/scorecard/*.sh) runs every
// row, or a comma-separated list of them.
var scorecardRows = []string{"control", "reference", "srt", "devbox-default", "devbox-run", "devbox-isolated", "devbox-feature"}

func rowWanted(name string) bool {
	v := os.Getenv("DEVBOX_SCORECARD_ROWS")
	if v == "" {
		return name == "control" || name == "devbox-default"
	}
	for _, r := range strings.Split(v, ",") {
		if r == "all" || r == name {
			return true
		}
	}
	return false
}

// controlMustEscape: what a sandbox with no fence at all must let out, or
// the scorecard judged wrong.
var controlMustEscape = []string{"egress-addr", "egress-name", "dns-tunnel", "fronting", "udp", "metadata", "persistence"}

// metadataIP is where the world stands in for the cloud metadata service.
var metadataIP = netip.MustParseAddr("169.254.169.254")

// TestScorecard runs `devbox escape` in each row's sandbox, against the
// same world: the control (no fence) must let out everything a world can
// see and devbox default must let out nothing: each attempt is blocked, or
// (a workspace file that did not exist when the container was created, so
// no read-only mount covers it) named by the host's `devbox audit` run
// after the scorecard, as the next start's initializeCommand runs it. With
// DEVBOX_SCORECARD_OUT set, each card is written there as ROW.json, and
// table.md beside them.
func TestScorecard(t *testing.T) {
	e := setup(t)
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the host audit's accepted states
	w := startWorld(t, e.d, e.base, e.worldd, func(w *world) []string {
		return []string{"*.exfil.test TXT 60 arrived", "*.exfil.test A 60 " + w.W2}
	})
	meta := metadataStandIn(t, e, w)
	secret := "DBXSECRET" + randHex(6)
	config := func(workspace string) escape.Config {
		return escape.Config{
			Nonce:       w.Nonce,
			Secret:      secret,
			SecretFiles: []string{"/root/devbox-secret"},
			Workspace:   workspace,
			World: &escape.World{
				Addrs:        []string{w.W2 + ":8080", w.W2 + ":80", "[" + w.W2v6 + "]:8080"},
				ICMP:         []string{w.W2, w.W2v6},
				Names:        []string{"denied.test:8080"},
				Resolvers:    []string{w.W1 + ":53", w.W2 + ":53"},
				TunnelDomain: "exfil.test",
				Allowed:      []string{"allowed.test:8080"},
				UDP:          []string{w.W2 + ":443", w.W2 + ":5000"},
				Metadata:     metadataIP.String() + ":80",
			},
		}
	}
	out := os.Getenv("DEVBOX_SCORECARD_OUT")
	var cards []escape.Card
	row := func(name string, fn func(t *testing.T) escape.Card, judge func(t *testing.T, c escape.Card)) {
		if !rowWanted(name) {
			return
		}
		t.Run(name, func(t *testing.T) {
			card := fn(t)
			card.Sandbox = name
			var b bytes.Buffer
			card.WriteTable(&b)
			t.Logf("scorecard of %s:\n%s", name, b.String())
			cards = append(cards, card)
			if out != "" {
				js, _ := json.MarshalIndent(card, "", "  ")
				if err := os.WriteFile(filepath.Join(out, name+".json"), js, 0o644); err != nil {
					t.Error(err)
				}
			}
			if judge != nil {
				judge(t, card)
			}
		})
	}
	noEscape := func(t *testing.T, c escape.Card) {
		for _, r := range c.Results {
			if r.Outcome == escape.Escaped {
				t.Errorf("escaped: %s: %s %s: %s", r.Category, r.Check, r.Target, r.Detail)
			}
		}
		for _, r := range c.Rows {
			if !r.Judged {
				t.Errorf("%s not judged: %s", r.Title, r.Why)
			}
		}
	}
	var image string
	devboxImage := func(t *testing.T) string {
		if image == "" {
			// TestFence's image when it ran in this process: the same policy.
			image = sampleImage
		}
		if image == "" {
			image = buildImage(t, e, w)
		}
		return image
	}

	row("control", func(t *testing.T) escape.Card {
		repo := scorecardRepo(t, e)
		args := append([]string{"run", "-d", "--user", "1000:1000", "-e", "HOME=/home/agent", "-v", repo + ":/workspace"}, w.runArgs()...)
		id := e.d.Run(t, append(args, e.base, "sleep", "infinity")...)
		t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", id).Run() })
		e.d.Run(t, "cp", e.devbox, id+":/usr/local/bin/devbox")
		plantLogin(t, e, id, "/home/agent", secret)
		return scoreContainer(t, e, id, meta, secret, config("/workspace"), []string{"exec", "-u", "1000:1000", id})
	}, func(t *testing.T, c escape.Card) {
		for _, bad := range c.MustEscape(controlMustEscape) {
			t.Errorf("the control kept in what it should let out: %s", bad)
		}
	})

	row("reference", func(t *testing.T) escape.Card {
		img := referenceImage(t, e, w)
		repo := scorecardRepo(t, e)
		args := append([]string{"run", "-d", "--user", "root", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
			"-v", repo + ":/workspace", "--entrypoint", "sleep"}, w.runArgs()...)
		id := e.d.Run(t, append(args, img, "infinity")...)
		t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", id).Run() })
		script, _ := filepath.Abs("../scripts/scorecard/init-firewall-reference.sh")
		e.d.Run(t, "cp", script, id+":/usr/local/bin/init-firewall.sh")
		t.Logf("init-firewall.sh:\n%s", e.d.Run(t, "exec", "-u", "root", "-e", "ALLOWED_NAMES=allowed.test", "-e", "PUBLISHED_CIDRS="+w.W1+"/32",
			id, "bash", "/usr/local/bin/init-firewall.sh"))
		plantLogin(t, e, id, "/home/dev", secret)
		return scoreContainer(t, e, id, meta, secret, config("/workspace"), []string{"exec", "-u", "dev", id})
	}, nil)

	row("srt", func(t *testing.T) escape.Card { return scoreSrt(t, e, secret) }, nil)

	row("devbox-default", func(t *testing.T) escape.Card {
		repo := sampleRepo(t, e, w, devboxImage(t))
		id := devcontainerUp(t, e, repo)
		requireFenced(t, e.d, id, "")
		ws := "/workspaces/" + filepath.Base(repo)
		c := config(ws)
		c.LeavePlanted = true
		card := scoreContainer(t, e, id, meta, secret, c, devcontainerArgv(e, repo))
		hostAudit(t, e, repo, ws, &card)
		return card
	}, noEscape)

	row("devbox-run", func(t *testing.T) escape.Card {
		repo := sandboxRepo(t, e, w)
		id := devcontainerUp(t, e, repo)
		requireFenced(t, e.d, id, "")
		ws := "/workspaces/" + filepath.Base(repo)
		return scoreContainer(t, e, id, meta, secret, config(ws), append(devcontainerArgv(e, repo), "devbox", "run", "--"))
	}, nil)

	row("devbox-isolated", func(t *testing.T) escape.Card {
		repo := scorecardRepo(t, e)
		pol := policyFor(e, w, e.registry+"/devbox/e2e:unused")
		os.MkdirAll(filepath.Join(repo, ".devcontainer"), 0o755)
		os.WriteFile(filepath.Join(repo, ".devcontainer/devbox.policy.jsonc"), []byte(pol), 0o644)
		hostGit := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"}
		git := []string{"-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@x.test"}
		run(t, repo, hostGit, "git", append(git, "add", ".")...)
		run(t, repo, hostGit, "git", append(git, "commit", "-qm", "host")...)
		t.Setenv("XDG_STATE_HOME", t.TempDir())
		run(t, repo, nil, e.devbox, "lock", ".devcontainer/devbox.policy.jsonc")
		run(t, repo, nil, e.devbox, "init", "--isolated")
		patchConfig(t, filepath.Join(repo, ".devcontainer/devcontainer.json"), w, true)
		run(t, repo, nil, e.devbox, "init", "--isolated")
		run(t, repo, nil, "chown", "-R", "1000:1000", ".")
		id := devcontainerUp(t, e, repo)
		requireFenced(t, e.d, id, "")
		// What the host shares is the checkout, read-only at OriginDir.
		return scoreContainer(t, e, id, meta, secret, config("/mnt/devbox-origin"), devcontainerArgv(e, repo))
	}, nil)

	row("devbox-feature", func(t *testing.T) escape.Card {
		ref := publishFeature(t, e)
		feature := featureRef(t, ref)
		env := cliEnv(t, e, feature)
		repo := featureRepo(t, e, w, feature, map[string]any{"presets": "", "allow": "allowed.test:8080"})
		run(t, repo, nil, "git", "init", "-q", ".")
		run(t, repo, nil, "chown", "-R", "1000:1000", ".")
		outcome, id, log := cliOutcome(e, repo, env, "up")
		if id != "" {
			t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", id).Run() })
		}
		if outcome != "success" {
			t.Fatalf("devcontainer up: outcome %q\n%s", outcome, tail(log))
		}
		requireFenced(t, e.d, id, "")
		ws := "/workspaces/" + filepath.Base(repo)
		argv := []string{"exec", "--workspace-folder", repo, "--docker-path", e.d.Path}
		return scoreContainerWith(t, e, id, meta, secret, config(ws), e.dcli, argv, env)
	}, nil)

	if out != "" && len(cards) > 0 {
		var b bytes.Buffer
		escape.WriteMarkdown(&b, loadCards(t, out))
		os.WriteFile(filepath.Join(out, "table.md"), b.Bytes(), 0o644)
		t.Logf("table (all cards in %s):\n%s", out, b.String())
	}
}

// hostAudit runs `devbox audit` on the host over repo after a scorecard
// that left what it could write (LeavePlanted), as the initializeCommand
// does before the next start, and marks each persistence escape it names
// as reported. An audit that names nothing, or misses one, leaves it
// escaped.
func hostAudit(t *testing.T, e env, repo, ws string, card *escape.Card) {
	t.Helper()
	out, err := runErr(repo, nil, e.devbox, "audit", "--json")
	var d gitaudit.Diff
	if jerr := json.Unmarshal([]byte(out), &d); jerr != nil {
		t.Fatalf("devbox audit --json (%v): %v\n%s", err, jerr, out)
	}
	if d.OK() != (err == nil) {
		t.Errorf("devbox audit: exit %v with %d changes: a start would not stop", err, len(d.Changes))
	}
	named := map[string]gitaudit.Change{}
	for _, c := range d.Changes {
		named[c.Path] = c
	}
	card.MarkReported(func(r escape.ScoredResult) (string, bool) {
		rel, ok := strings.CutPrefix(r.Target, ws+"/")
		c, found := named[rel]
		if r.Category != "persistence" || !ok || !found {
			return "", false
		}
		return "the host's devbox audit stops the next start: " + strings.Join(strings.Fields(c.String()), " "), true
	})
	for _, r := range card.Results {
		if r.Outcome == escape.Reported {
			t.Logf("reported at the next start: %s: %s", r.Target, r.Detail)
		}
	}
}

// referenceImage builds the reference row's image: devbox's image of the
// sample policy (iptables and ipset are in every devbox image) plus what
// the reference script uses, dig and awk. Its entrypoint is not used.
func referenceImage(t *testing.T, e env, w *world) string {
	t.Helper()
	dir := t.TempDir()
	tag := e.registry + "/devbox/e2e:ref-" + w.Nonce
	pol := strings.Replace(policyFor(e, w, tag), `"agent":`, `"packages": ["dnsutils", "gawk"]},
  "agent":`, 1)
	pol = strings.Replace(pol, `"tag": "`+tag+`"},`, `"tag": "`+tag+`",`, 1)
	os.WriteFile(filepath.Join(dir, "devbox.policy.jsonc"), []byte(pol), 0o644)
	out := run(t, dir, []string{"BUILDKIT_HOST=" + e.buildkit}, e.devbox, "build", "--push", "--progress", "plain", "--policy", "devbox.policy.jsonc")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "@sha256:") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("devbox build --push printed no REPO@sha256 reference:\n%s", out)
	return ""
}

// loadCards reads every ROW.json in dir, in scorecardRows order.
func loadCards(t *testing.T, dir string) []escape.Card {
	var cards []escape.Card
	for _, name := range scorecardRows {
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			continue
		}
		var c escape.Card
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s.json: %v", name, err)
		}
		cards = append(cards, c)
	}
	return cards
}

// scorecardRepo is a git repository owned by the container's user, as a
// developer's checkout is.
func scorecardRepo(t *testing.T, e env) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	e.d.ForgetDevcontainer(t, dir)
	os.MkdirAll(dir, 0o755)
	run(t, dir, nil, "git", "init", "-q", ".")
	os.WriteFile(filepath.Join(dir, "README"), []byte("host\n"), 0o644)
	run(t, dir, nil, "chown", "-R", "1000:1000", ".")
	return dir
}

// metadataStandIn starts a world server at 169.254.169.254 on an
// --internal network of its own (169.254.169.0/24): each sandbox is
// connected to it, so the address is on its link, as a cloud VM's
// metadata service is. (A route through the world's network does not
// work: Docker drops what an internal network forwards for addresses
// outside its subnet.) It returns the network's name.
func metadataStandIn(t *testing.T, e env, w *world) string {
	t.Helper()
	net := w.Net + "-meta"
	// One such subnet per daemon: wait for another run's to go, and drop
	// one a run cut short left behind.
	waitFor(t, 3*time.Minute, "network "+net, func() (bool, string) {
		out, err := e.d.Command(context.Background(), "network", "create", "--internal", "--subnet", metadataSubnet, net).CombinedOutput()
		if err != nil {
			dropLeftoverMeta(t, e.d)
		}
		return err == nil, string(out)
	})
	t.Cleanup(func() { e.d.Command(context.Background(), "network", "rm", net).Run() })
	if out, err := e.d.Command(context.Background(), "network", "inspect", "--format", "{{.Internal}}", net).Output(); err != nil || strings.TrimSpace(string(out)) != "true" {
		t.Fatalf("network %s is not internal (%q, %v): refusing to go on", net, out, err)
	}
	name := net + "-w"
	e.d.Run(t, "run", "-d", "--name", name, "--network", net, "--ip", metadataIP.String(), "-v", e.worldd+":/usr/local/bin/worldd:ro",
		e.base, "/usr/local/bin/worldd", "-addr", metadataIP.String(), "-tcp", "80", "-udp", "5000")
	t.Cleanup(func() { e.d.Command(context.Background(), "rm", "-f", name).Run() })
	waitFor(t, 30*time.Second, name+" ready", func() (bool, string) {
		out, _ := e.d.Command(context.Background(), "logs", name).CombinedOutput()
		return strings.Contains(string(out), "worldd: ready"), string(out)
	})
	return net
}

const metadataSubnet = "169.254.169.0/24"

// dropLeftoverMeta removes a metadata stand-in network that no container
// uses and that is older than any live run's: a scorecard attaches its
// server within seconds of creating the network, so one left empty for
// minutes belongs to a run that ended without its clean-up (a killed test
// process), and would hold the subnet for ever ("Pool overlaps").
func dropLeftoverMeta(t *testing.T, d devboxtest.Docker) {
	out, err := d.Command(context.Background(), "network", "ls", "-q", "--filter", "name=dbx-e2e-").Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		info, err := d.Command(context.Background(), "network", "inspect", "--format",
			"{{.Name}} {{.Created.Unix}} {{len .Containers}}{{range .IPAM.Config}} {{.Subnet}}{{end}}", id).Output()
		f := strings.Fields(string(info))
		if err != nil || len(f) < 4 || !strings.HasSuffix(f[0], "-meta") || !slices.Contains(f[3:], metadataSubnet) || f[2] != "0" {
			continue
		}
		if created, err := strconv.ParseInt(f[1], 10, 64); err == nil && time.Since(time.Unix(created, 0)) > 5*time.Minute {
			t.Logf("removing %s, a metadata network no container has used for %v (left by a run cut short)", f[0], time.Since(time.Unix(created, 0)).Round(time.Second))
			d.Command(context.Background(), "network", "rm", id).Run()
		}
	}
}

// devcontainerArgv is `devcontainer exec` for repo, as argv after the CLI.
func devcontainerArgv(e env, repo string) []string {
	return []string{"exec", "--workspace-folder", repo, "--docker-path", e.d.Path}
}

// plantLogin puts the secret where Claude Code keeps its login
// (~/.claude/.credentials.json, the agent's own file), as after `claude
// login` in a container whose ~/.claude is the agent's: the reference
// devcontainer's way (a volume at ~/.claude). devbox's rows keep
// credentials in its gateway instead, so they get no such file.
func plantLogin(t *testing.T, e env, id, home, secret string) {
	t.Helper()
	e.d.Run(t, "exec", "-u", "root", id, "sh", "-c", "mkdir -p "+home+"/.claude && echo '{\"claudeAiOauth\":{\"accessToken\":\""+secret+"\"}}' > "+home+
		"/.claude/.credentials.json && chmod 600 "+home+"/.claude/.credentials.json && chown -R 1000:1000 "+home)
}

// scoreContainer plants the secret where no agent should reach it (a root
// process's environment, a root-only file), connects the container to the
// metadata stand-in's network, copies the config in and runs `devbox escape` through
// argv: docker's (when argv starts with "exec" and names the container) or
// the Dev Containers CLI's.
func scoreContainer(t *testing.T, e env, id, meta, secret string, c escape.Config, argv []string) escape.Card {
	t.Helper()
	if len(argv) > 1 && argv[1] == "-u" {
		return scoreContainerWith(t, e, id, meta, secret, c, e.d.Path, argv, e.d.Env())
	}
	return scoreContainerWith(t, e, id, meta, secret, c, e.dcli, argv, []string{"DOCKER_HOST=" + e.d.Host})
}

func scoreContainerWith(t *testing.T, e env, id, meta, secret string, c escape.Config, bin string, argv, env []string) escape.Card {
	t.Helper()
	e.d.Run(t, "exec", "-d", "-u", "root", "-e", "DEVBOX_SCORECARD_SECRET="+secret, id, "sleep", "3600")
	e.d.Run(t, "exec", "-u", "root", id, "sh", "-c", "umask 077 && echo "+secret+" > /root/devbox-secret")
	e.d.Run(t, "network", "connect", meta, id)
	cfg := filepath.Join(t.TempDir(), "scorecard.json")
	js, _ := json.Marshal(c)
	os.WriteFile(cfg, js, 0o644)
	e.d.Run(t, "cp", cfg, id+":/opt/devbox-scorecard.json")
	e.d.Run(t, "exec", "-u", "root", id, "chmod", "644", "/opt/devbox-scorecard.json")
	cmd := exec.Command(bin, append(argv, "devbox", "escape", "--world", "/opt/devbox-scorecard.json", "--json")...)
	cmd.Env = append(os.Environ(), env...)
	return runScorecard(t, cmd)
}

// runScorecard runs cmd (a `devbox escape --json`) and decodes its card;
// its exit status only says whether something escaped.
func runScorecard(t *testing.T, cmd *exec.Cmd) escape.Card {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var card escape.Card
	js := stdout.String()
	if i := strings.Index(js, "{"); i >= 0 {
		js = js[i:]
	}
	if jerr := json.Unmarshal([]byte(js), &card); jerr != nil || len(card.Rows) == 0 {
		t.Fatalf("devbox escape (%v) printed no scorecard: %v\nstdout:\n%s\nstderr:\n%s", err, jerr, tail(stdout.String()), tail(stderr.String()))
	}
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1 || card.Escapes == 0) {
		t.Fatalf("devbox escape: %v with %d escapes\nstderr:\n%s", err, card.Escapes, tail(stderr.String()))
	}
	return card
}

// scoreSrt runs `devbox escape` under Anthropic's sandbox-runtime (srt)
// wrapping a shell, as uid 1000 in a netns world (srt's proxies run
// outside its sandbox, in the world's client namespace, so nothing leaves
// the test). Its settings allow allowed.test, deny nothing more; the home
// and workspace are the host's, so both are judged.
func scoreSrt(t *testing.T, e env, secret string) escape.Card {
	t.Helper()
	srt := devboxtest.Env(t, "DEVBOX_SRT")
	tw := testworld.New(t)
	allowed, denied := testworld.HostsV4[2], testworld.HostsV4[3]
	tw.DNS.Set("allowed.test", dns.TypeA, 60, allowed.String())
	tw.DNS.Set("denied.test", dns.TypeA, 60, denied.String())
	tw.DNS.Set("*.exfil.test", dns.TypeTXT, 60, "arrived")
	tw.AddHost(t, metadataIP)
	if out, err := tw.Command(context.Background(), "ip", "route", "add", metadataIP.String()+"/32", "via", testworld.HostsV4[0].String()).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := tw.Command(context.Background(), "sysctl", "-w", "net.ipv4.ping_group_range=0 2147483647").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	serveMetadata(t, tw)

	// A home and a workspace of uid 1000's own, with the user's Claude
	// login in it, as on a laptop; Claude Code's environment (what srt
	// wraps) holds the API key.
	// Not under /tmp, which the settings let srt write.
	root, err := os.MkdirTemp("/var/tmp", "devbox-scorecard-srt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	home, ws := filepath.Join(root, "home"), filepath.Join(root, "home", "src", "ws")
	os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
	os.MkdirAll(ws, 0o755)
	os.WriteFile(filepath.Join(home, ".claude", ".credentials.json"), []byte(`{"token":"`+secret+`"}`), 0o600)
	run(t, ws, nil, "git", "init", "-q", ".")
	devbox := filepath.Join(root, "devbox")
	b, _ := os.ReadFile(e.devbox)
	os.WriteFile(devbox, b, 0o755)
	c := escape.Config{
		Nonce: "srt" + randHex(4), Secret: secret, Workspace: ws, Home: home,
		World: &escape.World{
			Addrs:        []string{denied.String() + ":8080", denied.String() + ":80", "[" + testworld.HostsV6[3].String() + "]:8080"},
			ICMP:         []string{denied.String(), testworld.HostsV6[3].String()},
			Names:        []string{"denied.test:8080"},
			Resolvers:    []string{testworld.HostsV4[1].String() + ":53"},
			TunnelDomain: "exfil.test",
			Allowed:      []string{"allowed.test:8080"},
			UDP:          []string{denied.String() + ":443", denied.String() + ":5000"},
			Metadata:     metadataIP.String() + ":80",
		},
	}
	js, _ := json.Marshal(c)
	os.WriteFile(filepath.Join(root, "scorecard.json"), js, 0o644)
	os.WriteFile(filepath.Join(root, "srt.json"), []byte(`{
  "network": {"allowedDomains": ["allowed.test"], "deniedDomains": []},
  "filesystem": {"denyRead": [], "allowWrite": ["`+ws+`", "/tmp"], "denyWrite": []}
}`), 0o644)
	run(t, root, nil, "chown", "-R", "1000:1000", root)
	// The user's other terminal: a process of the same user, outside the
	// sandbox, holding the secret in its environment.
	other := tw.Command(context.Background(), "setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--", "env", "GH_TOKEN="+secret, "sleep", "600")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	cmd := tw.Command(context.Background(), "setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--",
		"env", "-i", "HOME="+home, "PATH="+os.Getenv("PATH"), "ANTHROPIC_API_KEY="+secret, srt, "--settings", filepath.Join(root, "srt.json"), "-c",
		fmt.Sprintf("cd %s && %s escape --world %s/scorecard.json --json", ws, devbox, root))
	cmd.Dir = ws
	v, _ := exec.Command(srt, "--version").CombinedOutput()
	t.Logf("srt %s", strings.TrimSpace(string(v)))
	return runScorecard(t, cmd)
}

// serveMetadata has the netns world answer on 169.254.169.254:80.
func serveMetadata(t *testing.T, tw *testworld.World) {
	t.Helper()
	if err := testworld.InNS(tw.Server, func() error {
		l, err := net.Listen("tcp", netip.AddrPortFrom(metadataIP, 80).String())
		if err == nil {
			tw.Rec.ServeTCP(l)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
