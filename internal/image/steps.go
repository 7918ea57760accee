// Package image turns a sandbox policy and its lock into a container image.
//
// The install steps exist once, as data: Steps(spec) returns the ordered
// list of Step values (run a script, copy a file, fetch a pinned URL) that
// both renderers consume:
//
//   - Graph(spec) builds the BuildKit LLB graph that `devbox build` solves
//     (pure; golden-tested), and Build solves it against a BuildKit daemon and
//     exports it (registry push, OCI layout, Docker engine).
//   - Dockerfile(spec) renders the same steps as a Dockerfile for `devbox
//     init`'s "build from the repository" mode. Its build context must hold
//     ContextBinary (a linux devbox binary) and ContextPolicy (the bytes of
//     PolicyJSON).
//
// The image: the base pinned by digest; Debian packages with apt lists and
// caches removed; the devbox-dns system user and the policy's non-root user,
// no sudo and every setuid/setgid bit stripped; Claude Code's native binary
// from its npm platform package, checked against the lock's sha512, with the
// self-updater disabled; a login banner (LoginBannerPath) that warns when the
// fence is down; the devbox binary; the normalized policy last, so a
// change to the network policy alone rebuilds only that small layer. The
// image config runs `devbox entrypoint -- sleep infinity` as root and carries
// the devcontainer.metadata label built from FenceProperties.
package image

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/sandbox"
)

// Build-context file names the Dockerfile copies from, and the LLB graph's
// local source for the devbox binary.
const (
	// ContextBinary is the linux devbox binary in the build context.
	ContextBinary = "devbox"
	// ContextPolicy is the normalized policy (PolicyJSON) in the build context.
	ContextPolicy = "policy.json"
	// ContextBaseline is the normalized team baseline in the build context
	// (only with Spec.Baseline).
	ContextBaseline = "baseline.json"
)

// StageClaude is the throwaway stage that downloads and verifies Claude
// Code; only its /out tree reaches the image, never the 186 MB tarball.
const StageClaude = "claude"

// claudeOut is the directory of StageClaude copied onto the image root.
const claudeOut = "/out"

// claudeTarball is where StageClaude's fetch step puts the npm tarball.
const claudeTarball = "/tmp/devbox-claude/claude.tgz"

// ClaudeSettingsPath is Claude Code's managed settings file on Linux. Managed
// settings win over user and project settings, so the agent cannot turn the
// updater back on from its own files.
const ClaudeSettingsPath = sandbox.ClaudeManagedSettingsPath

// LoginBannerPath is the profile script a login shell sources: it runs
// `devbox doctor --quiet`, which prints nothing when the fence is up and a
// loud warning (on stderr) when it is not, so a user opening a shell sees a
// failed fence instead of trusting a container that is not fenced.
const LoginBannerPath = "/etc/profile.d/devbox.sh"

// loginBanner is the content of LoginBannerPath. It must never fail or
// stop a shell started with -e: doctor exits 1 when something is not
// enforced.
var loginBanner = []string{
	"# devbox: warn at login when the fence is not up (silent when it is).",
	"if [ -x " + layout.BinaryPath + " ]; then " + layout.BinaryPath + " doctor --quiet || true; fi",
}

// BasePackages are the Debian packages every devbox image has: the firewall
// (iptables, ipset, iproute2), TLS roots, the sandbox layer and socat.
var BasePackages = []string{"bubblewrap", "ca-certificates", "iproute2", "ipset", "iptables", "socat"}

// DefaultTools are the Debian packages a developer and Claude Code expect in
// a shell: git to commit, ps/top (procps), a pager, curl, jq, ripgrep
// (Claude Code's search falls back to grep without it), unzip and bash
// completion. docs/build.md gives each one's reason and size;
// image.packages adds more.
var DefaultTools = []string{"bash-completion", "curl", "git", "jq", "less", "procps", "ripgrep", "unzip"}

// slimConfig is the dpkg config the packages step writes for its own
// apt-get install, with slimExcludes: Debian's slim images' path-excludes
// (docker-debian-artifacts), shell-quoted.
const slimConfig = "/etc/dpkg/dpkg.cfg.d/devbox-slim"

var slimExcludes = []string{
	"'path-exclude /usr/share/doc/*'", "'path-include /usr/share/doc/*/copyright'",
	"'path-exclude /usr/share/groff/*'", "'path-exclude /usr/share/info/*'",
	"'path-exclude /usr/share/linda/*'", "'path-exclude /usr/share/lintian/overrides/*'",
	"'path-exclude /usr/share/locale/*'", "'path-include /usr/share/locale/locale.alias'",
	"'path-exclude /usr/share/man/*'",
}

// leanConfig is the dpkg config the packages step writes beside slimConfig,
// with leanExcludes: the parts of the default tools' dependencies that
// nothing in the image uses. It goes afterwards too.
const leanConfig = "/etc/dpkg/dpkg.cfg.d/devbox-lean"

// gitServerExcludes are git's programs for serving repositories and
// mailing patches (git daemon, shell, imap-send, the WebDAV http-push,
// scalar): 12 MB that a developer's or an agent's checkout never runs.
// git http-backend stays: it is how a test (or a developer) serves a
// repository over HTTP from the image (e2e TestCredentials' world does).
var gitServerExcludes = []string{
	"'path-exclude /usr/lib/git-core/git-daemon'",
	"'path-exclude /usr/lib/git-core/git-shell'", "'path-exclude /usr/bin/git-shell'",
	"'path-exclude /usr/lib/git-core/git-imap-send'", "'path-exclude /usr/lib/git-core/git-http-push'",
	"'path-exclude /usr/lib/git-core/scalar'", "'path-exclude /usr/bin/scalar'",
}

// perlExcludes leave out the full Perl that Debian's git depends on: no
// program of the git package is written in Perl (its Perl modules serve
// git-svn and git-send-email, packages of their own), and perl-base, in
// every Debian base, keeps /usr/bin/perl with its core modules. 53 MB.
// They apply only when nothing else installed needs Perl: see
// restorePerlScript.
var perlExcludes = []string{
	"'path-exclude /usr/share/perl/5.*'", "'path-exclude /usr/lib/*/perl/5.*'",
	"'path-exclude /usr/lib/*/libperl.so.5.*'",
}

// perlPackages are the packages whose files perlExcludes leave out; a
// policy that lists one of them in image.packages keeps them whole.
func isPerlPackage(name string) bool {
	return name == "perl" || strings.HasPrefix(name, "libperl5.") || strings.HasPrefix(name, "perl-modules-5.")
}

// restorePerlScript puts back the files perlExcludes left out when another
// installed package needs Perl (a policy's image.packages such as rename
// or a libfoo-perl): one that depends on perl, libperl or perl-modules
// itself, or one of git's Perl commands (git-email, git-svn, …), which
// count on git's dependency. It names them, drops the exclusion and
// reinstalls the two packages whole. Any package in a dependency chain to
// Perl depends on it directly, so one level of Depends/Pre-Depends is
// enough.
var restorePerlScript = []string{
	// One command per line: the Feature's Dockerfile joins the lines with
	// "; " (runLine).
	`perl_users=$(dpkg-query -W -f='${Status}\t${Package}\t${Depends}, ${Pre-Depends}\n' | awk -F '\t' '` +
		`$1 != "install ok installed" { next } ` +
		`($2 ~ /^git-./ && $2 != "git-man") || $2 == "gitweb" { print $2; next } ` +
		`$2 ~ /^(git|perl|libperl5\.[0-9.]+|perl-modules-5\.[0-9.]+|liberror-perl)$/ { next } ` +
		`{ n = split($3, dep, /[,|]/); for (i = 1; i <= n; i++) { d = dep[i]; sub(/^ +/, "", d); sub(/[ (:].*/, "", d); ` +
		`if (d ~ /^(perl|libperl5\.[0-9.]+|perl-modules-5\.[0-9.]+)$/) { print $2; break } } }')`,
	`if [ -n "$perl_users" ]; then`,
	`  echo "devbox: keeping Perl whole, needed by:" $perl_users`,
	"  rm -f " + leanConfig,
	`  apt-get install -y --no-install-recommends --reinstall $(dpkg-query -W -f='${Status} ${Package}\n' 'libperl5.*' 'perl-modules-5.*' 2>/dev/null | awk '/^install ok installed / { print $4 }')`,
	"fi",
}

// forbiddenPackages would give the agent's user a way back to root.
var forbiddenPackages = []string{"sudo", "doas", "opendoas", "sudo-ldap", "pkexec", "policykit-1", "polkitd"}

// StepKind says what a Step does.
type StepKind int

const (
	// RunStep runs Script as root with /bin/sh -eu.
	RunStep StepKind = iota + 1
	// CopyStep copies Src (a build-context file, or a path in stage From)
	// to Dest.
	CopyStep
	// FetchStep downloads URL to Dest. It is not verified by itself: the
	// next RunStep of its stage checks the lock's integrity.
	FetchStep
)

func (k StepKind) String() string {
	switch k {
	case RunStep:
		return "run"
	case CopyStep:
		return "copy"
	case FetchStep:
		return "fetch"
	}
	return fmt.Sprintf("StepKind(%d)", int(k))
}

// Step is one install step of the image, in build order.
type Step struct {
	// Name is a short stable identifier ("packages", "policy"); it names the
	// build vertex ("[devbox] packages") in progress output.
	Name string
	// Stage is "" for the image itself, or StageClaude.
	Stage string
	Kind  StepKind
	// Script is the shell script of a RunStep.
	Script string
	// Network is true when a RunStep needs the network (apt). Other steps
	// run with no network at all.
	Network bool
	// URL is what a FetchStep downloads.
	URL string
	// From is the stage a CopyStep copies from; "" means the build context.
	From string
	// Src is the CopyStep source: a build-context file name, or a directory
	// in stage From ending in "/" to copy its contents.
	Src string
	// Dest is where a CopyStep or FetchStep writes.
	Dest string
	// Mode is the file mode a CopyStep from the build context sets.
	Mode os.FileMode
	// Data is the content of a build-context file known at graph time (the
	// policy); nil for the devbox binary, which comes from a local source.
	Data []byte
	// Tail marks the last steps, the ones that follow from the policy
	// (policy, baseline, Claude Code's managed settings): each writes one
	// file (Dest, Mode, Data). BuildKit builds every other step; devbox writes
	// the tail steps' files itself as the image's last layer (TailLayer),
	// so a policy edit never reaches BuildKit's cache or export. The
	// Dockerfile form runs them as ordinary steps.
	Tail bool
}

// Spec is the input of one image build: a validated policy, its lock and
// the target platform.
type Spec struct {
	Policy *policy.Policy
	Lock   *policy.Lock
	// Platform is "linux/amd64" or "linux/arm64".
	Platform string
	// Source is the org.opencontainers.image.source label ("" = none).
	Source string
	// Baseline is the team baseline baked at layout.BaselinePath (nil:
	// none); Policy must lie within it (see internal/baseline).
	Baseline *policy.Policy
	// BinaryDigest is the sha256 (hex) of the devbox binary baked in for
	// Platform; Build sets it. It names the binary's local source in the
	// graph: BuildKit merges identical vertices of concurrent solves, so
	// two clients baking different binaries under one fixed source ID
	// could each get the other's binary (seen in the E2E suite).
	BinaryDigest string
}

var (
	debianPackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	userName      = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
)

// Validate checks what the image builder relies on beyond policy
// validation: names that end up in shell scripts, a usable non-root user, a
// lock that pins what this platform needs.
func (s Spec) Validate() error {
	if s.Policy == nil || s.Lock == nil {
		return errors.New("image: spec needs a policy and a lock")
	}
	if _, err := claudeArch(s.Platform); err != nil {
		return err
	}
	u := s.Policy.Image.User
	switch {
	case !userName.MatchString(u.Name):
		return fmt.Errorf("image.user.name %q is not a valid user name", u.Name)
	case u.Name == "root" || u.Name == layout.DNSUser:
		return fmt.Errorf("image.user.name %q is reserved", u.Name)
	case u.UID <= 0 || u.GID <= 0:
		return fmt.Errorf("image.user uid %d / gid %d: the agent's user must not be root", u.UID, u.GID)
	case u.UID == layout.DNSUID || u.GID == layout.DNSUID:
		return fmt.Errorf("image.user uid/gid %d is reserved for %s", layout.DNSUID, layout.DNSUser)
	}
	for _, p := range s.Policy.Image.Packages {
		if !debianPackage.MatchString(p) {
			return fmt.Errorf("image.packages: %q is not a Debian package name", p)
		}
		if slices.Contains(forbiddenPackages, p) {
			return fmt.Errorf("image.packages: %q would give the agent's user a way to root; devbox images never have it", p)
		}
	}
	if s.Lock.Base.Digest == "" {
		return errors.New("the lock has no base digest (run `devbox lock`)")
	}
	if s.Policy.Agent.ClaudeCode != policy.ClaudeCodeNone {
		if _, ok := s.Lock.ClaudeCode.Platforms[s.Platform]; !ok {
			return fmt.Errorf("the lock does not pin Claude Code for %s (run `devbox lock --platform %s`)", s.Platform, s.Platform)
		}
	}
	return nil
}

// Packages returns the Debian packages the image installs: BasePackages,
// DefaultTools and the policy's, sorted and without duplicates.
func (s Spec) Packages() []string {
	pkgs := slices.Concat(BasePackages, DefaultTools, s.Policy.Image.Packages)
	slices.Sort(pkgs)
	return slices.Compact(pkgs)
}

// leanExcludes returns the dpkg path-excludes of the packages step beyond
// Debian's slim ones: git's server programs, and Perl's modules unless the
// policy lists a Perl package itself.
func (s Spec) leanExcludes() []string {
	if slices.ContainsFunc(s.Policy.Image.Packages, isPerlPackage) {
		return gitServerExcludes
	}
	return slices.Concat(gitServerExcludes, perlExcludes)
}

// PolicyJSON returns the normalized policy as the image stores it at
// layout.PolicyPath: (*policy.Policy).Normalize, the one canonical
// form, which the entrypoint reads back with policy.Parse.
func PolicyJSON(p *policy.Policy) ([]byte, error) {
	b, err := p.Normalize()
	if err != nil {
		return nil, fmt.Errorf("normalizing the policy: %w", err)
	}
	return b, nil
}

// claudeArch maps a platform to the suffix of Claude Code's npm platform
// package.
func claudeArch(platform string) (string, error) {
	switch platform {
	case "linux/amd64":
		return "x64", nil
	case "linux/arm64":
		return "arm64", nil
	}
	return "", fmt.Errorf("platform %q is not supported (linux/amd64 or linux/arm64)", platform)
}

// ClaudePackage returns the npm package carrying Claude Code's native binary
// for platform ("@anthropic-ai/claude-code-linux-x64").
func ClaudePackage(platform string) (string, error) {
	a, err := claudeArch(platform)
	if err != nil {
		return "", err
	}
	return "@anthropic-ai/claude-code-linux-" + a, nil
}

// sha512Hex turns an SRI integrity ("sha512-<base64>") into the hex digest
// sha512sum prints.
func sha512Hex(integrity string) (string, error) {
	b64, ok := strings.CutPrefix(integrity, "sha512-")
	if !ok {
		return "", fmt.Errorf("integrity %q is not sha512", integrity)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 64 {
		return "", fmt.Errorf("integrity %q is not a valid sha512", integrity)
	}
	return hex.EncodeToString(raw), nil
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Steps returns the install steps for spec, in build order. StageClaude's
// steps come first; the image's steps are ordered from the slowest-changing
// (packages) to the fastest (the policy), because a step's layer is rebuilt
// whenever anything before it changes.
func Steps(spec Spec) ([]Step, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	var steps []Step
	if spec.Policy.Agent.ClaudeCode != policy.ClaudeCodeNone {
		pkg := spec.Lock.ClaudeCode.Platforms[spec.Platform]
		want, err := sha512Hex(pkg.Integrity)
		if err != nil {
			return nil, fmt.Errorf("lock: Claude Code %s: %w", spec.Platform, err)
		}
		steps = append(steps,
			Step{Name: "claude-fetch", Stage: StageClaude, Kind: FetchStep, URL: pkg.Tarball, Dest: claudeTarball},
			Step{Name: "claude-verify", Stage: StageClaude, Kind: RunStep, Script: strings.Join([]string{
				"want=" + want,
				"got=$(sha512sum " + claudeTarball + " | cut -d' ' -f1)",
				`if [ "$got" != "$want" ]; then`,
				`  echo "devbox: Claude Code tarball ` + pkg.Tarball + ` does not match the lock (devbox.lock.json): sha512 $got, want $want" >&2`,
				"  exit 1",
				"fi",
				"mkdir -p " + claudeOut + "/usr/local/bin /tmp/devbox-unpack",
				"tar -xzf " + claudeTarball + " -C /tmp/devbox-unpack package/claude",
				"install -m 0755 /tmp/devbox-unpack/package/claude " + claudeOut + "/usr/local/bin/claude",
			}, "\n")},
		)
	}

	u := spec.Policy.Image.User
	home := "/home/" + u.Name
	steps = append(steps, Step{Name: "packages", Kind: RunStep, Network: true, Script: strings.Join(slices.Concat([]string{
		// devbox installs with apt and fences with iptables: a base without
		// them (alpine, busybox, distroless) fails here, before anything
		// else runs, with what to do instead.
		"if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then",
		"  echo " + shellQuote("devbox: image.base "+spec.Lock.Base.Ref+" is not Debian-based (no apt-get/dpkg): devbox images install packages with apt; "+
			"use a Debian-based image (the official debian, node, python and golang images are), or add the devbox feature to a devcontainer.json on this base instead (docs/feature.md)") + " >&2",
		"  exit 1",
		"fi",
		"export DEBIAN_FRONTEND=noninteractive",
		// dpkg leaves out docs, man pages and translations while it unpacks,
		// as in Debian's slim images (the same path-excludes): tens of MB
		// no one reads in a container. Copyrights stay. The file goes
		// afterwards, so the base's own dpkg config is what remains.
		"printf '%s\\n' " + strings.Join(slimExcludes, " ") + " > " + slimConfig,
		// The lean excludes go further, for the default tools: git's
		// server programs, and the full Perl git depends on but never runs
		// (docs/build.md, "Size").
		"printf '%s\\n' " + strings.Join(spec.leanExcludes(), " ") + " > " + leanConfig,
		"apt-get update",
		"apt-get install -y --no-install-recommends " + strings.Join(spec.Packages(), " "),
	}, restorePerlScript, []string{
		"apt-get clean",
		"rm -f " + slimConfig + " " + leanConfig,
		// Lists, caches and logs only make the layer bigger and less
		// reproducible.
		"rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log /var/cache/debconf/*-old /var/cache/ldconfig/aux-cache",
	}), "\n")})

	accounts := []string{
		// No way back to root for the agent's user: no sudo, no setuid or
		// setgid binary (su, mount, passwd, …). Nothing in the image needs
		// one: the entrypoint starts as root and only drops privileges.
		"for p in " + strings.Join(forbiddenPackages, " ") + "; do",
		`  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then dpkg --purge --force-depends "$p"; fi`,
		"done",
		"rm -rf /etc/sudoers /etc/sudoers.d",
		fmt.Sprintf("groupadd --system --gid %d %s", layout.DNSUID, layout.DNSUser),
		fmt.Sprintf("useradd --system --uid %d --gid %d --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin %s",
			layout.DNSUID, layout.DNSUID, layout.DNSUser),
		// The name gate runs by uid whether or not the account exists;
		// the account gives it a name in ps and keeps the uid from being
		// handed to anything else.
		fmt.Sprintf("groupadd --system --gid %d %s", layout.GateUID, layout.GateUser),
		fmt.Sprintf("useradd --system --uid %d --gid %d --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin %s",
			layout.GateUID, layout.GateUID, layout.GateUser),
		fmt.Sprintf("getent group %d >/dev/null || groupadd --gid %d %s", u.GID, u.GID, u.Name),
		// A base may already have a user with this uid: the official Node
		// images have node (1000:1000). It becomes the agent's user, home
		// moved, so files the base gave it stay its own.
		fmt.Sprintf("if old=$(getent passwd %d | cut -d: -f1) && [ -n \"$old\" ]; then", u.UID),
		fmt.Sprintf("  if [ \"$old\" != %s ]; then usermod --login %s --home %s --move-home \"$old\"; fi", u.Name, u.Name, home),
		fmt.Sprintf("  usermod --gid %d --shell /bin/bash %s && mkdir -p %s && chown %d:%d %s", u.GID, u.Name, home, u.UID, u.GID, home),
		"else",
		fmt.Sprintf("  useradd --uid %d --gid %d --create-home --home-dir %s --shell /bin/bash %s", u.UID, u.GID, home, u.Name),
		"fi",
		// The toolchain caches, the user's from the start, so npm, pip and
		// go write them in the container and under `devbox run`
		// (sandbox.ToolchainCaches).
		fmt.Sprintf("mkdir -p %[1]s/.cache %[1]s/.npm %[1]s/go && chown %[2]d:%[3]d %[1]s/.cache %[1]s/.npm %[1]s/go", home, u.UID, u.GID),
		// Claude Code's state directory (CLAUDE_CONFIG_DIR, the per-container
		// volume devbox init mounts there): a new named volume takes its
		// owner and mode from the image's directory, so without this one
		// Docker makes it root:root 0755 and Claude Code cannot save its
		// login or settings. The entrypoint repairs volumes made before.
		fmt.Sprintf("install -d -o %d -g %d -m 0700 %s/%s", u.UID, u.GID, home, layout.ClaudeDir),
		// The workspace is bind-mounted from the host and may be owned by
		// another uid (rootless Podman, Docker Desktop): without this git
		// refuses to run there ("dubious ownership"). Only root and the
		// agent's user exist here, so the check guards nothing.
		"git config --system --add safe.directory '*'",
		"mkdir -p " + layout.ConfigDir + " " + layout.LogDir,
	}
	if !spec.Policy.Credentials.IsZero() {
		// The credential gateway's account, and the secrets directory the
		// per-container volume takes its owner and mode from.
		accounts = append(accounts,
			fmt.Sprintf("groupadd --system --gid %d %s", layout.GatewayUID, layout.GatewayUser),
			fmt.Sprintf("useradd --system --uid %d --gid %d --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin %s",
				layout.GatewayUID, layout.GatewayUID, layout.GatewayUser),
			fmt.Sprintf("install -d -o 0 -g %d -m 0750 %s", layout.GatewayUID, layout.SecretsDir),
		)
	}
	steps = append(steps, Step{Name: "accounts", Kind: RunStep, Script: strings.Join(append(accounts,
		fmt.Sprintf("chown %d:%d %s", layout.DNSUID, layout.DNSUID, layout.LogDir),
		"chmod 0755 "+layout.LogDir,
		`find / -xdev -type f \( -perm -4000 -o -perm -2000 \) -exec chmod u-s,g-s {} +`,
		`left=$(find / -xdev -type f \( -perm -4000 -o -perm -2000 \))`,
		`if [ -n "$left" ]; then echo "devbox: setuid/setgid files left: $left" >&2; exit 1; fi`,
	), "\n")})

	if spec.Policy.Agent.ClaudeCode != policy.ClaudeCodeNone {
		steps = append(steps, Step{Name: "claude", Kind: CopyStep, From: StageClaude, Src: claudeOut + "/", Dest: "/"})
	}
	pj, err := PolicyJSON(spec.Policy)
	if err != nil {
		return nil, err
	}
	quoted := make([]string, len(loginBanner))
	for i, l := range loginBanner {
		quoted[i] = shellQuote(l)
	}
	steps = append(steps, Step{Name: "login-banner", Kind: RunStep, Script: strings.Join([]string{
		"mkdir -p " + path.Dir(LoginBannerPath),
		"printf '%s\\n' " + strings.Join(quoted, " ") + " > " + LoginBannerPath,
		"chmod 0644 " + LoginBannerPath,
	}, "\n")})
	steps = append(steps, Step{Name: "devbox", Kind: CopyStep, Src: ContextBinary, Dest: layout.BinaryPath, Mode: 0o755})
	if spec.Policy.Agent.ClaudeCode != policy.ClaudeCodeNone {
		// Managed settings win over the user's own: the updater stays off
		// (the env var is also in the image config for shells that skip
		// settings) and, with sandbox.enabled, Claude Code's Bash sandbox is
		// on with the policy's lists. They follow the policy, so they are
		// written here, after the heavy layers, not in StageClaude.
		settings, err := sandbox.ClaudeManagedSettings(spec.Policy)
		if err != nil {
			return nil, fmt.Errorf("Claude Code managed settings: %w", err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, settings); err != nil {
			return nil, fmt.Errorf("Claude Code managed settings: %w", err)
		}
		steps = append(steps, Step{Name: "claude-settings", Kind: RunStep, Script: strings.Join([]string{
			"mkdir -p " + path.Dir(ClaudeSettingsPath),
			"printf '%s\\n' " + shellQuote(compact.String()) + " > " + ClaudeSettingsPath,
			"chmod 0644 " + ClaudeSettingsPath,
		}, "\n"), Tail: true, Dest: ClaudeSettingsPath, Mode: 0o644, Data: append(compact.Bytes(), '\n')})
	}
	if spec.Baseline != nil {
		bj, err := PolicyJSON(spec.Baseline)
		if err != nil {
			return nil, fmt.Errorf("baseline: %w", err)
		}
		steps = append(steps, Step{Name: "baseline", Kind: CopyStep, Src: ContextBaseline, Dest: layout.BaselinePath, Mode: 0o644, Data: bj, Tail: true})
	}
	steps = append(steps,
		Step{Name: "policy", Kind: CopyStep, Src: ContextPolicy, Dest: layout.PolicyPath, Mode: 0o644, Data: pj, Tail: true},
	)
	return steps, nil
}
