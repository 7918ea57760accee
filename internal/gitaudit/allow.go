package gitaudit

import (
	"regexp"
	"strings"
)

// Allowed reports whether a config entry, as git printed it, is one of
// the few git writes in ordinary use and can only ever be data: who you
// are, which branch tracks which, where remotes are (over https, ssh or a
// local path), and the repository's own format flags. Everything else is
// reported, whatever it is: the audit does not try to know which of git's
// hundreds of keys run a program (core.fsmonitor, protocol.allow,
// url.*.insteadOf to ext::, imap.tunnel, ...), it only knows which ones
// cannot.
func Allowed(e Entry) bool {
	if hasControl(e.Name) || hasControl(e.Value) {
		return false
	}
	section, sub, key := splitName(e.Name)
	if e.NoValue {
		// A key alone is boolean true.
		return sub == "" && allowedBool[section+"."+key] || sub != "" && allowedSubBool[section+".*."+key]
	}
	v := e.Value
	if sub == "" {
		switch section + "." + key {
		case "user.name", "user.email":
			return true
		case "core.repositoryformatversion":
			return v == "0" || v == "1"
		case "core.logallrefupdates":
			return isBool(v) || strings.EqualFold(v, "always")
		case "extensions.objectformat":
			return v == "sha1" || v == "sha256"
		}
		return allowedBool[section+"."+key] && isBool(v)
	}
	switch section + ".*." + key {
	case "branch.*.remote":
		return v == "." || safeName.MatchString(v)
	case "branch.*.merge":
		return safeRef(v)
	case "branch.*.rebase":
		return isBool(v) || v == "merges"
	case "remote.*.url", "remote.*.pushurl", "submodule.*.url":
		return SafeURL(v)
	case "remote.*.fetch", "remote.*.push":
		return safeRefspec.MatchString(v) && !strings.Contains(v, "..")
	case "remote.*.tagopt":
		return v == "--no-tags" || v == "--tags"
	}
	return allowedSubBool[section+".*."+key] && isBool(v)
}

// allowedBool are keys without subsection whose only meaning is a flag.
var allowedBool = map[string]bool{
	"core.bare": true, "core.filemode": true, "core.logallrefupdates": true,
	"core.ignorecase": true, "core.precomposeunicode": true, "core.symlinks": true,
	"core.sparsecheckout": true, "core.sparsecheckoutcone": true,
	"user.useconfigonly": true,
}

// allowedSubBool are flags under a subsection (the "*").
var allowedSubBool = map[string]bool{
	"submodule.*.active": true, "remote.*.prune": true, "remote.*.prunetags": true,
}

func isBool(v string) bool {
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off", "1", "0", "":
		return true
	}
	return false
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0
}

var (
	safeName    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	safeRefspec = regexp.MustCompile(`^[+^]?refs/[A-Za-z0-9._/*-]+(:refs/[A-Za-z0-9._/*-]+)?$`)
	refName     = regexp.MustCompile(`^refs/[A-Za-z0-9._/-]+$`)
	// urlHost is the host part of an https or ssh URL: no option-like
	// leading '-' (ssh would read it as an option).
	urlHost = regexp.MustCompile(`^(?:[A-Za-z0-9._~%-]+@)?(?:[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\])(?::[0-9]+)?$`)
)

// safeRef is a ref name in the safe set: refs/ then letters, digits and
// ._/- , with no empty, dot- or dash-led component and no "..".
func safeRef(v string) bool {
	if !refName.MatchString(v) || strings.Contains(v, "..") || strings.HasSuffix(v, "/") || strings.HasSuffix(v, ".lock") {
		return false
	}
	for _, c := range strings.Split(v, "/") {
		if c == "" || c[0] == '.' || c[0] == '-' {
			return false
		}
	}
	return true
}

// SafeRef is safeRef for the other devbox packages that move refs: a name
// under refs/heads/ in the safe set.
func SafeRef(v string) bool { return strings.HasPrefix(v, "refs/heads/") && safeRef(v) }

// SafeURL reports whether git would reach the URL with a transport that
// runs nothing the URL chooses: https://, ssh:// (and git's scp-like
// host:path), file:// and local paths. Everything else is refused:
// transport helpers ("ext::sh -c …", "fd::", "foo::…"), unknown schemes
// (git runs git-remote-<scheme>), plain http and git://, an option-like
// leading '-'.
func SafeURL(v string) bool {
	if v == "" || v[0] == '-' || hasControl(v) || strings.Contains(v, "::") || strings.ContainsAny(v, " \\") {
		return false
	}
	if scheme, rest, ok := strings.Cut(v, "://"); ok {
		host, _, _ := strings.Cut(rest, "/")
		switch strings.ToLower(scheme) {
		case "https", "ssh", "git+ssh", "ssh+git":
			return urlHost.MatchString(host)
		case "file":
			return true
		}
		return false
	}
	// git's rule: a ':' before the first '/' makes it scp-like ssh.
	colon := strings.IndexByte(v, ':')
	slash := strings.IndexByte(v, '/')
	if colon >= 0 && (slash < 0 || colon < slash) {
		return urlHost.MatchString(v[:colon])
	}
	return true // a local path
}
