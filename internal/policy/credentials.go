package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// DefaultAnthropicHost is the Messages API host the anthropic route
// forwards to when credentials.anthropic.host is left out.
const DefaultAnthropicHost = "api.anthropic.com"

// Credentials are the secrets the credential gateway injects on the
// agent's behalf. The agent never holds them: it talks to the gateway on
// loopback, and the hosts named here are reachable through the gateway
// only. A policy without the section has the zero value, and its
// normalized form has no "credentials" key.
type Credentials struct {
	// Anthropic is the Messages API route for Claude Code (nil: none).
	Anthropic *AnthropicCredential `json:"anthropic,omitempty"`
	// Git are the git smart-HTTP routes, one per host.
	Git []GitCredential `json:"git,omitempty"`
	// HTTP are the header-injection routes, one per host.
	HTTP []HTTPCredential `json:"http,omitempty"`
}

// AnthropicCredential is an API key (sk-ant-api…) or an OAuth token from
// `claude setup-token` (sk-ant-oat…), stored as the secret Secret.
type AnthropicCredential struct {
	Secret string `json:"secret"`
	// Host is the API host (default DefaultAnthropicHost).
	Host string `json:"host"`
	// Protect names more hosts only the gateway may reach (see
	// ProtectedHosts), beside the service's siblings devbox knows.
	Protect []string `json:"protect,omitempty"`
}

// GitCredential is a token for one git host, used for the listed repos only.
type GitCredential struct {
	Host   string `json:"host"`
	Secret string `json:"secret"`
	// Repos are "owner/name" paths (GitLab's nested groups allowed), without
	// a ".git" suffix. Fetch is allowed for each; push only when Push.
	Repos []string `json:"repos"`
	Push  bool     `json:"push"`
	// Protect: as AnthropicCredential.Protect.
	Protect []string `json:"protect,omitempty"`
}

// HTTPCredential injects one header into requests to one host.
type HTTPCredential struct {
	Host   string `json:"host"`
	Header string `json:"header"`
	// Value is the header's value; "${secret}" is replaced by the secret.
	Value  string `json:"value"`
	Secret string `json:"secret"`
	// Protect: as AnthropicCredential.Protect.
	Protect []string `json:"protect,omitempty"`
}

// SecretPlaceholder is replaced by the secret in HTTPCredential.Value.
const SecretPlaceholder = "${secret}"

// route is what every kind of credential route has: the host it is bound
// to, the secret it injects, the hosts it protects besides its own and the
// key path of its entry.
type route struct {
	host, secret string
	protect      []string
	at           string
}

// routes returns the routes in policy order: anthropic, git, http.
func (c Credentials) routes() []route {
	var out []route
	if a := c.Anthropic; a != nil {
		out = append(out, route{a.Host, a.Secret, a.Protect, "credentials.anthropic"})
	}
	for i, g := range c.Git {
		out = append(out, route{g.Host, g.Secret, g.Protect, fmt.Sprintf("credentials.git[%d]", i)})
	}
	for i, h := range c.HTTP {
		out = append(out, route{h.Host, h.Secret, h.Protect, fmt.Sprintf("credentials.http[%d]", i)})
	}
	return out
}

// servicePresets are, per credential host, the other hosts of the same
// service where a credential of that service works: a route protects its
// whole service, not one name, or a foreign token would be used next door
// (a git route for github.com with api.github.com open lets the agent push
// through the REST API with its own token). The hosts are data: devbox's
// tests never contact them.
var servicePresets = map[string][]presetEntry{
	"github.com": {
		{"*.github.com", "api.github.com (REST and GraphQL: pushes, gists, issues with any token), uploads.github.com (release assets), codeload.github.com, gist.github.com, the package registries (npm.pkg.github.com, …)"},
		{"*.githubusercontent.com", "raw., objects., media., release-assets., gist.githubusercontent.com: files served by token"},
		{"ghcr.io", "the container registry: images pushed with a token"},
	},
	"gitlab.com": {
		{"*.gitlab.com", "registry.gitlab.com (images pushed with a token) and the other GitLab.com services"},
	},
	"bitbucket.org": {
		{"*.bitbucket.org", "api.bitbucket.org (the REST API) and the other Bitbucket Cloud hosts"},
	},
	DefaultAnthropicHost: {
		{"console.anthropic.com", "the Console: API keys and workbench under any account's session"},
		{"claude.ai", "Claude apps: uploads under any account's session"},
		{"*.claude.ai", "Claude apps' other hosts"},
		{"claude.com", "Claude apps and sign-in"},
		{"*.claude.com", "platform.claude.com (the Console's newer host) and the others"},
	},
}

// ProtectedHost is one name only the credential gateway may reach: a
// route's host, a sibling host of its service, or a protect entry. Host is
// an exact name or "*.domain" (every name under domain).
type ProtectedHost struct {
	Host string `json:"host"`
	// From is the key path that protects it ("credentials.git[0].host",
	// "credentials.git[0].protect"), with " (service preset)" for a
	// sibling devbox knows; Why says what the host is, for presets.
	From string `json:"from"`
	Why  string `json:"why,omitempty"`
}

// ProtectedHosts returns every protected name in policy order (each
// route's host, its service's siblings, its protect entries), each once.
func (c Credentials) ProtectedHosts() []ProtectedHost {
	var out []ProtectedHost
	add := func(h ProtectedHost) {
		if !slices.ContainsFunc(out, func(o ProtectedHost) bool { return o.Host == h.Host }) {
			out = append(out, h)
		}
	}
	for _, r := range c.routes() {
		add(ProtectedHost{Host: r.host, From: r.at + ".host"})
		for _, e := range servicePresets[r.host] {
			add(ProtectedHost{Host: e.dest, From: r.at + ".host (service preset)", Why: e.why})
		}
		for _, p := range r.protect {
			add(ProtectedHost{Host: p, From: r.at + ".protect"})
		}
	}
	return out
}

// ProtectList is ProtectedHosts' names: what the firewall protects.
func (c Credentials) ProtectList() []string {
	var out []string
	for _, h := range c.ProtectedHosts() {
		out = append(out, h.Host)
	}
	return out
}

// distinct returns field of each route, in policy order, without duplicates.
func (c Credentials) distinct(field func(route) string) []string {
	var out []string
	for _, r := range c.routes() {
		if v := field(r); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// Hosts returns every host a credential is bound to, in policy order,
// without duplicates: the hosts only the gateway may reach.
func (c Credentials) Hosts() []string {
	return c.distinct(func(r route) string { return r.host })
}

// Secrets returns every secret name the policy uses, without duplicates.
func (c Credentials) Secrets() []string {
	return c.distinct(func(r route) string { return r.secret })
}

// IsZero reports whether no route is configured.
func (c Credentials) IsZero() bool {
	return c.Anthropic == nil && len(c.Git) == 0 && len(c.HTTP) == 0
}

var secretName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// CheckSecretName returns "" when s may name a secret, else a reason.
// Secret names are file names in the secrets directory, so the alphabet is
// small: no dots (no "..", no hidden or temporary files), no slashes.
func CheckSecretName(s string) string {
	if secretName.MatchString(s) {
		return ""
	}
	return "not a secret name (lower-case letters, digits, \"_\" and \"-\", starting with a letter or digit, at most 63 characters)"
}

func checkSecret(s string) (string, string) {
	if r := CheckSecretName(s); r != "" {
		return "", r
	}
	return s, ""
}

// checkCredentialHost accepts one exact host name: no wildcard, address or
// port, since the gateway speaks TLS to it by name on port 443.
func checkCredentialHost(s string) (string, string) {
	d, err := ParseDestination(s)
	if err != nil {
		return "", err.(*DestinationError).Reason
	}
	if d.Kind != Host || d.Port != 0 {
		return "", "want one exact host name (no wildcard, IP address or port): the gateway connects to it by name over TLS on port 443"
	}
	return d.Name, ""
}

// checkProtect accepts an exact host name or a wildcard ("*.example.com":
// every name under it), without port or address: the firewall protects
// names, whatever port they are reached on.
func checkProtect(s string) (string, string) {
	d, err := ParseDestination(s)
	if err != nil {
		return "", err.(*DestinationError).Reason
	}
	if (d.Kind != Host && d.Kind != Wildcard) || d.Port != 0 {
		return "", "want a host name or a wildcard such as \"*.example.com\" (no IP address or port): every port of the name is protected"
	}
	return d.String(), ""
}

// protectField decodes a route's "protect" list.
func (d *decoder) protectField(dst *[]string) field {
	return field{"protect", func(v *hujson.Value, path string) { *dst = sortFold(d.strings(v, path, checkProtect)) }}
}

var repoSegment = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// checkRepo accepts "owner/name" (or deeper, for nested groups), each
// segment a plain path element; a ".git" suffix is dropped.
func checkRepo(s string) (string, string) {
	s = strings.TrimSuffix(s, ".git")
	segs := strings.Split(s, "/")
	if len(segs) < 2 {
		return "", "want \"owner/name\" (the repository's path on the host)"
	}
	for _, seg := range segs {
		if !repoSegment.MatchString(seg) || strings.HasSuffix(seg, ".") {
			return "", "each path segment is letters, digits, \".\", \"_\" or \"-\", not starting with \".\" or \"-\" (no \"..\", no empty segment, no URL)"
		}
	}
	return s, ""
}

var headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// forbiddenHeaders are headers the gateway owns: hop-by-hop headers, the
// framing and the host.
var forbiddenHeaders = map[string]bool{
	"host": true, "connection": true, "content-length": true, "transfer-encoding": true,
	"te": true, "trailer": true, "upgrade": true, "keep-alive": true,
	"proxy-connection": true, "proxy-authorization": true, "proxy-authenticate": true,
}

func checkHeader(s string) (string, string) {
	if !headerToken.MatchString(s) {
		return "", "not an HTTP header name"
	}
	if forbiddenHeaders[strings.ToLower(s)] {
		return "", "the gateway sets this header itself; inject a credential header such as Authorization"
	}
	return s, ""
}

func checkHeaderValue(s string) (string, string) {
	if strings.Count(s, SecretPlaceholder) != 1 {
		return "", "must contain " + SecretPlaceholder + " exactly once, where the secret goes"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", "contains a control character"
		}
	}
	return s, ""
}

// required reports a missing key of the object at v.
func (d *decoder) required(v *hujson.Value, path string, keys ...string) {
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		return
	}
	have := map[string]bool{}
	for _, m := range obj.Members {
		have[m.Name.Value.(hujson.Literal).String()] = true
	}
	for _, k := range keys {
		if !have[k] {
			d.errAt(v, path, "missing key %q", k)
		}
	}
}

func (d *decoder) credentials(v *hujson.Value, path string, c *Credentials) {
	d.object(v, path,
		field{"anthropic", func(v *hujson.Value, path string) {
			a := &AnthropicCredential{Host: DefaultAnthropicHost}
			d.object(v, path,
				field{"secret", func(v *hujson.Value, path string) { d.checked(v, path, &a.Secret, checkSecret) }},
				field{"host", func(v *hujson.Value, path string) { d.checked(v, path, &a.Host, checkCredentialHost) }},
				d.protectField(&a.Protect),
			)
			d.required(v, path, "secret")
			c.Anthropic = a
		}},
		field{"git", func(v *hujson.Value, path string) {
			hosts := map[string]string{}
			d.array(v, path, func(v *hujson.Value, path string) {
				var g GitCredential
				d.object(v, path,
					d.hostField(&g.Host, hosts),
					field{"secret", func(v *hujson.Value, path string) { d.checked(v, path, &g.Secret, checkSecret) }},
					field{"repos", func(v *hujson.Value, path string) {
						g.Repos = sortFold(d.strings(v, path, checkRepo))
						if _, ok := v.Value.(*hujson.Array); ok && len(v.Value.(*hujson.Array).Elements) == 0 {
							d.errAt(v, path, "list at least one repository: the token is used for the listed ones only")
						}
					}},
					field{"push", func(v *hujson.Value, path string) {
						if b, ok := d.boolean(v, path); ok {
							g.Push = b
						}
					}},
					d.protectField(&g.Protect),
				)
				d.required(v, path, "host", "secret", "repos")
				c.Git = append(c.Git, g)
			})
		}},
		field{"http", func(v *hujson.Value, path string) {
			hosts := map[string]string{}
			d.array(v, path, func(v *hujson.Value, path string) {
				var h HTTPCredential
				d.object(v, path,
					d.hostField(&h.Host, hosts),
					field{"header", func(v *hujson.Value, path string) { d.checked(v, path, &h.Header, checkHeader) }},
					field{"value", func(v *hujson.Value, path string) { d.checked(v, path, &h.Value, checkHeaderValue) }},
					field{"secret", func(v *hujson.Value, path string) { d.checked(v, path, &h.Secret, checkSecret) }},
					d.protectField(&h.Protect),
				)
				d.required(v, path, "host", "header", "value", "secret")
				c.HTTP = append(c.HTTP, h)
			})
		}},
	)
}

// hostField is a route list entry's "host": a credential host, and one
// entry per host in the list (seen maps a host to the entry that listed
// it), since the gateway could not tell which of two entries applies.
func (d *decoder) hostField(dst *string, seen map[string]string) field {
	return field{"host", func(v *hujson.Value, path string) {
		d.checked(v, path, dst, checkCredentialHost)
		host := *dst
		if host == "" {
			return
		}
		parent := path[:strings.LastIndexByte(path, '.')]
		if first, ok := seen[host]; ok {
			d.errAt(v, path, "%q is already listed at %s: one entry per host", host, first)
			return
		}
		seen[host] = parent
	}}
}

// credentialHostErrors reports credential hosts the policy does not allow
// on port 443. The gateway needs them allowed, and the policy must say so
// itself: a credentials entry never widens egress (a repository policy that
// may only narrow a team's baseline cannot add a host through it).
func credentialHostErrors(ex *Explanation) []Error {
	p := ex.Policy
	var errs []Error
	check := func(path, host string) {
		if !allowedOn443(p.Network, host) {
			errs = append(errs, ex.At(path, fmt.Sprintf("%q is not allowed on port 443 by network.allow (or is denied): the gateway could not reach it; allow it explicitly (for api.anthropic.com, the \"anthropic\" preset)", host)))
		}
	}
	if a := p.Credentials.Anthropic; a != nil {
		check("credentials.anthropic.host", a.Host)
	}
	for i, g := range p.Credentials.Git {
		check(fmt.Sprintf("credentials.git[%d].host", i), g.Host)
	}
	for i, h := range p.Credentials.HTTP {
		check(fmt.Sprintf("credentials.http[%d].host", i), h.Host)
	}
	return errs
}

func allowedOn443(n Network, host string) bool {
	covers := func(d Destination) bool {
		if d.Port != 0 && d.Port != 443 {
			return false
		}
		return d.Kind == Host && d.Name == host || d.Kind == Wildcard && strings.HasSuffix(host, "."+d.Name)
	}
	for _, d := range n.Deny {
		if covers(d) {
			return false
		}
	}
	for _, d := range n.Allow {
		if covers(d) {
			return true
		}
	}
	return false
}
