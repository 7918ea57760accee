package baseline

import (
	"fmt"
	"slices"

	"github.com/devbox-dev/devbox/internal/policy"
)

// credentials checks the repository's credential routes against the
// baseline's. A route the baseline does not have would send one of the
// user's secrets somewhere the team never bound it to: a repository could
// point credentials.http at another host the baseline allows and receive
// the GitHub token there. So every repository route is a baseline route
// (same host, same secret) or a narrower one (fewer git repos, no push).
// A route may be dropped: its host stays protected all the same (see
// FenceConfig), reachable by the gateway's uid only, on every port.
func (c *checker) credentials(b, p *policy.Policy) {
	bc, pc := b.Credentials, p.Credentials

	if a := pc.Anthropic; a != nil {
		ba := bc.Anthropic
		switch {
		case ba == nil:
			c.add("credentials.anthropic", "the baseline has no anthropic route; a repository cannot add one", "credentials (no anthropic route)")
		case a.Host != ba.Host:
			c.add("credentials.anthropic.host", fmt.Sprintf("%q: the baseline's anthropic route goes to %q", a.Host, ba.Host), anthropicRef(ba))
		case a.Secret != ba.Secret:
			c.add("credentials.anthropic.secret", fmt.Sprintf("%q: the baseline's anthropic route uses the secret %q", a.Secret, ba.Secret), anthropicRef(ba))
		default:
			c.protect("credentials.anthropic", a.Protect, ba.Protect, anthropicRef(ba))
		}
	}
	for i, g := range pc.Git {
		bg, at, ref, ok := baseRoute(c, "git", i, g.Host, bc.Git, func(x policy.GitCredential) string { return x.Host })
		if !ok {
			continue
		}
		if g.Secret != bg.Secret {
			c.add(at+".secret", fmt.Sprintf("%q: the baseline's route for %s uses the secret %q", g.Secret, g.Host, bg.Secret), ref)
		}
		for _, r := range g.Repos {
			if !slices.Contains(bg.Repos, r) {
				c.add(c.repo.ElementPath(at+".repos", r), fmt.Sprintf("%q is not one of the baseline route's repositories (%s)", r, quoteList(bg.Repos)), ref+" repos")
			}
		}
		if g.Push && !bg.Push {
			c.add(at+".push", fmt.Sprintf("the baseline's route for %s is fetch only; the repository cannot allow push", g.Host), ref+" push false")
		}
		c.protect(at, g.Protect, bg.Protect, ref)
	}
	for i, h := range pc.HTTP {
		bh, at, ref, ok := baseRoute(c, "http", i, h.Host, bc.HTTP, func(x policy.HTTPCredential) string { return x.Host })
		if !ok {
			continue
		}
		for _, f := range []struct{ key, got, want string }{
			{"secret", h.Secret, bh.Secret},
			{"header", h.Header, bh.Header},
			{"value", h.Value, bh.Value},
		} {
			if f.got != f.want {
				c.add(at+"."+f.key, fmt.Sprintf("%q: the baseline's route for %s has %s %q", f.got, h.Host, f.key, f.want), ref)
			}
		}
		c.protect(at, h.Protect, bh.Protect, ref)
	}

	// A route the repository drops keeps its host protected (see
	// FenceConfig): that needs the DNS filter to answer the host, so the
	// repository may not deny it by name.
	for _, h := range carriedDenied(b, p) {
		ref := ""
		for _, r := range baselineRoutes(bc) {
			if r.host == h && ref == "" {
				ref = r.ref
			}
		}
		c.add("network.deny", fmt.Sprintf("%s is a host the baseline binds to a credential: it stays reachable by the credential gateway only, which needs its name answered; leave it out of network.allow instead of denying it", h), ref)
	}
}

// protect reports the baseline route's protect entries a kept route left
// out: each is a host the team made reachable through the gateway only.
func (c *checker) protect(at string, got, want []string, ref string) {
	for _, h := range want {
		if !slices.Contains(got, h) {
			c.add(at+".protect", fmt.Sprintf("%q is protected by the baseline's route; the repository's route must keep it in protect (or any identity could be used there)", h), ref+" protect")
		}
	}
}

type baselineRoute struct{ host, secret, ref string }

func baselineRoutes(bc policy.Credentials) []baselineRoute {
	var out []baselineRoute
	if a := bc.Anthropic; a != nil {
		out = append(out, baselineRoute{a.Host, a.Secret, anthropicRef(a)})
	}
	for i, g := range bc.Git {
		out = append(out, baselineRoute{g.Host, g.Secret, fmt.Sprintf("credentials.git[%d] %q", i, g.Host)})
	}
	for i, h := range bc.HTTP {
		out = append(out, baselineRoute{h.Host, h.Secret, fmt.Sprintf("credentials.http[%d] %q", i, h.Host)})
	}
	return out
}

func anthropicRef(a *policy.AnthropicCredential) string {
	return fmt.Sprintf("credentials.anthropic %q", a.Host)
}

// baseRoute finds the baseline's route of kind to host, for the
// repository's i-th route of that kind: the route, the repository route's
// path (at) and the baseline route's name (ref). A host the baseline has
// no route of that kind for is reported, and ok is false.
func baseRoute[T any](c *checker, kind string, i int, host string, routes []T, hostOf func(T) string) (route T, at, ref string, ok bool) {
	at = fmt.Sprintf("credentials.%s[%d]", kind, i)
	j := slices.IndexFunc(routes, func(r T) bool { return hostOf(r) == host })
	if j < 0 {
		c.add(at+".host", fmt.Sprintf("%q: the baseline has no %s route for this host", host, kind), routeRef(kind, routes, hostOf))
		return route, at, "", false
	}
	return routes[j], at, fmt.Sprintf("credentials.%s[%d] %q", kind, j, host), true
}

// routeRef names the baseline's routes of one kind, for a repository route
// to a host none of them has.
func routeRef[T any](kind string, routes []T, host func(T) string) string {
	if len(routes) == 0 {
		return fmt.Sprintf("credentials (no %s route)", kind)
	}
	hosts := make([]string, len(routes))
	for i, r := range routes {
		hosts[i] = host(r)
	}
	return "credentials." + kind + " " + quoteList(hosts)
}
