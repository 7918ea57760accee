package policy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"regexp"
	"strings"

	"github.com/devbox-dev/devbox/internal/layout"
)

// Each check returns the canonical value, or a reason the value is wrong.
// Reasons never repeat the raw value: the decoder quotes it.

var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

func checkClaudeCode(s string) (string, string) {
	if s == ClaudeCodeNone || semver.MatchString(s) {
		return s, ""
	}
	return "", fmt.Sprintf("pin an exact version X.Y.Z (for example %s) or %q; \"latest\", ranges and tags are not allowed", DefaultClaudeCode, ClaudeCodeNone)
}

func checkLogin(s string) (string, string) {
	if s == LoginInContainer {
		return s, ""
	}
	return "", fmt.Sprintf("the only value is %q (Claude Code's own /login inside the container, the agent then holds the token); leave \"login\" out to use the credential gateway (credentials.anthropic)", LoginInContainer)
}

// loginErrors reports agent.login "in-container" beside
// credentials.anthropic: the gateway would replace whatever the agent
// logged in with, so the policy says two contradictory things.
func loginErrors(ex *Explanation) []Error {
	p := ex.Policy
	if p.Agent.Login == LoginInContainer && p.Credentials.Anthropic != nil {
		return []Error{ex.At("agent.login", fmt.Sprintf("%q and credentials.anthropic are both set: keep credentials.anthropic (the gateway holds the credential, the agent never does) or remove it to log in inside the container", LoginInContainer))}
	}
	return nil
}

// Image references, after the grammar of github.com/distribution/reference
// v0.6.0: [domain[:port]/]path-component(/path-component)*[:tag][@digest],
// with the digests go-digest accepts (sha256, sha384, sha512, lower-case
// hex of the algorithm's length). The package keeps to the standard library,
// so the grammar is copied; reference_test.go checks it against the library,
// string for string.
var (
	refDomain = `(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
	refPath   = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*`
	refTag    = `[\w][\w.-]{0,127}`
	refDigest = `sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}`
	refRegexp = regexp.MustCompile(`^(?:(` + refDomain + `)/)?(` + refPath + `)(?::(` + refTag + `))?(?:@(` + refDigest + `))?$`)
)

func checkRef(s string) (tag, digest bool, reason string) {
	if len(s) > 512 {
		return false, false, "image reference is too long"
	}
	m := refRegexp.FindStringSubmatch(s)
	if m == nil {
		if strings.ToLower(s) != s && refRegexp.MatchString(strings.ToLower(s)) {
			return false, false, "repository names must be lower-case"
		}
		return false, false, "not a valid image reference (want [registry/]repository[:tag][@sha256:…])"
	}
	if len(m[2]) > 255 {
		return false, false, "repository name is longer than 255 characters"
	}
	return m[3] != "", m[4] != "", ""
}

func checkBaseRef(s string) (string, string) {
	if _, _, reason := checkRef(s); reason != "" {
		return "", reason
	}
	return s, ""
}

func checkPushTag(s string) (string, string) {
	if s == "" {
		return "", ""
	}
	_, digest, reason := checkRef(s)
	if reason != "" {
		return "", reason
	}
	if digest {
		return "", "a push target cannot carry a digest: the registry computes it"
	}
	return s, ""
}

var debianPackage = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

func checkPackage(s string) (string, string) {
	if debianPackage.MatchString(s) {
		return s, ""
	}
	if strings.ContainsAny(s, "=") {
		return "", "version pins are not supported here: give the Debian package name only"
	}
	return "", "not a Debian package name (lower-case letters, digits, \"+\", \"-\" and \".\", at least two characters, starting with a letter or digit)"
}

var posixUser = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// systemUsers exist in Debian's base image (or are devbox's own), so the
// agent's account cannot take their names.
var systemUsers = map[string]bool{
	"root": true, "daemon": true, "bin": true, "sys": true, "sync": true, "games": true,
	"man": true, "lp": true, "mail": true, "news": true, "uucp": true, "proxy": true,
	"www-data": true, "backup": true, "list": true, "irc": true, "gnats": true,
	"nobody": true, "_apt": true, reservedUser: true, layout.GateUser: true, layout.GatewayUser: true,
}

func checkUserName(s string) (string, string) {
	if !posixUser.MatchString(s) {
		return "", "not a portable user name (lower-case letter or \"_\" first, then lower-case letters, digits, \"_\" or \"-\", at most 32 characters)"
	}
	if s == "root" {
		return "", "the agent never runs as root: pick a non-root user name"
	}
	if systemUsers[s] {
		return "", "this name belongs to a system account of the image"
	}
	return s, ""
}

func checkID(n int) string {
	switch {
	case n == 0:
		return "0 is root: the agent never runs as root"
	case n < 1 || n > 60000:
		return "want 1..60000"
	case n == reservedID:
		return fmt.Sprintf("%d is reserved for the DNS filter's account %s", reservedID, reservedUser)
	case n == layout.GateUID:
		// The rules let this uid reach allowed names' addresses past the
		// name gate.
		return fmt.Sprintf("%d is reserved for the name gate's account %s", n, layout.GateUser)
	case n == layout.GatewayUID:
		return fmt.Sprintf("%d is reserved for the credential gateway's account %s", n, layout.GatewayUser)
	}
	return ""
}

func checkPreset(s string) (string, string) {
	if _, ok := presets[s]; ok {
		return s, ""
	}
	return "", fmt.Sprintf("unknown preset (known presets: %s)", strings.Join(PresetNames(), ", "))
}

func parseUpstream(s string) (netip.AddrPort, string) {
	if reason := checkBytes(s); reason != "" {
		return netip.AddrPort{}, reason
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return netip.AddrPort{}, "port 0 is not a DNS port"
		}
		return ap, checkUpstreamAddr(ap.Addr())
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, DefaultDNSPort), checkUpstreamAddr(a)
	}
	return netip.AddrPort{}, "want an IP address, optionally with a port (192.0.2.53, [2001:db8::53]:53); names cannot be resolved before the resolver is known"
}

func checkUpstreamAddr(a netip.Addr) string {
	switch {
	case a.Zone() != "":
		return "an IPv6 zone (%…) is not allowed"
	case a.Is4In6():
		return "IPv4-mapped IPv6 address: write the IPv4 address"
	case a.IsUnspecified() || a.IsMulticast():
		return "not a unicast address"
	}
	return ""
}

func checkLogFile(s string) (string, string) {
	if reason := checkPathBytes(s); reason != "" {
		return "", reason
	}
	if !path.IsAbs(s) || path.Clean(s) != s || s == "/" {
		return "", "want a clean absolute file path, such as " + DefaultLogFile
	}
	return s, ""
}

func checkPathBytes(s string) string {
	if s == "" {
		return "empty path"
	}
	for i, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Sprintf("contains the control character %U at offset %d", r, i)
		}
	}
	return ""
}

// checkSandboxPath validates a sandbox path: absolute ("/etc/x"), in the
// home ("~" or "~/x") or relative to the workspace ("build", "**/.env").
// Patterns use path.Match syntax plus "**" for any depth; paths are
// cleaned, and ".." is refused so no entry can reach outside its root.
func checkSandboxPath(s string) (string, string) {
	if reason := checkPathBytes(s); reason != "" {
		return "", reason
	}
	if strings.HasPrefix(s, "~") && s != "~" && !strings.HasPrefix(s, "~/") {
		return "", "\"~user\" is not supported: use \"~/\" for the agent's home"
	}
	for _, part := range strings.Split(s, "/") {
		if part == ".." {
			return "", "\"..\" is not allowed"
		}
		if _, err := path.Match(strings.ReplaceAll(part, "**", "*"), ""); err != nil {
			return "", "bad pattern (see Go's path.Match syntax)"
		}
	}
	c := path.Clean(s)
	if c == "." {
		return "", "names the workspace itself"
	}
	return c, ""
}

// checkWritablePath is checkSandboxPath, refusing "/" and the home, which
// would make the sandbox pointless.
func checkWritablePath(s string) (string, string) {
	c, reason := checkSandboxPath(s)
	if reason != "" {
		return "", reason
	}
	if c == "/" || c == "~" {
		return "", "making the whole file system or home writable defeats the sandbox; list the directories you need"
	}
	return c, ""
}

// Validate checks a Policy built or changed in Go by running it through the
// same checks as Parse. Errors carry key paths but no file positions.
func (p *Policy) Validate() error {
	raw, err := json.Marshal((*plainPolicy)(p))
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	_, err = Parse("", raw)
	var errs *Errors
	if err != nil && asErrors(err, &errs) {
		for i := range errs.List {
			errs.List[i].Line, errs.List[i].Col = 0, 0
		}
	}
	return err
}
