package gitaudit

import "testing"

func TestAllowed(t *testing.T) {
	allowed := []Entry{
		{Name: "user.email", Value: "t@x.test"}, {Name: "user.name", Value: "A B"},
		{Name: "core.bare", Value: "false"}, {Name: "core.bare", NoValue: true}, {Name: "core.repositoryformatversion", Value: "0"},
		{Name: "core.filemode", Value: "true"}, {Name: "core.logallrefupdates", Value: "true"}, {Name: "core.ignorecase", Value: "true"},
		{Name: "core.precomposeunicode", Value: "true"},
		{Name: "remote.origin.url", Value: "https://x.test/r.git"}, {Name: "remote.origin.url", Value: "git@x.test:r.git"},
		{Name: "remote.origin.url", Value: "ssh://git@x.test:22/r"}, {Name: "remote.origin.url", Value: "/srv/r"},
		{Name: "remote.origin.url", Value: "../r"}, {Name: "remote.origin.url", Value: "file:///srv/r"},
		{Name: "remote.origin.fetch", Value: "+refs/heads/*:refs/remotes/origin/*"},
		{Name: "branch.main.remote", Value: "origin"}, {Name: "branch.main.merge", Value: "refs/heads/main"},
		{Name: "submodule.lib.url", Value: "https://x.test/lib"}, {Name: "submodule.lib.active", Value: "true"},
	}
	for _, e := range allowed {
		if !Allowed(e) {
			t.Errorf("Allowed(%q = %q) = false", e.Name, e.Value)
		}
	}
	refused := []Entry{
		{Name: "core.fsmonitor", Value: "x"}, {Name: "core.fsmonitor", Value: "false"}, {Name: "core.hookspath", Value: "h"},
		{Name: "core.worktree", Value: "../x"}, {Name: "core.pager", Value: "less"}, {Name: "core.bare", Value: "maybe"},
		{Name: "core.repositoryformatversion", Value: "2"},
		{Name: "protocol.allow", Value: "always"}, {Name: "protocol.ext.allow", Value: "always"},
		{Name: "url.ext::sh -c x.insteadof", Value: "https://x.test/"}, {Name: "imap.tunnel", Value: "x"},
		{Name: "remote.origin.url", Value: "ext::sh -c x"}, {Name: "remote.origin.url", Value: "fd::3"},
		{Name: "remote.origin.url", Value: "foo::https://x.test/"}, {Name: "remote.origin.url", Value: "foo://x.test/"},
		{Name: "remote.origin.url", Value: "http://x.test/r"}, {Name: "remote.origin.url", Value: "-oProxyCommand=x"},
		{Name: "remote.origin.url", Value: "ssh://-oProxyCommand=x/r"}, {Name: "remote.origin.url", Value: "-x:r"},
		{Name: "remote.origin.url", Value: "https://x.test/\nr"},
		{Name: "remote.origin.uploadpack", Value: "x"}, {Name: "remote.origin.fetch", Value: "+refs/heads/*:refs/../x"},
		{Name: "branch.main.merge", Value: "refs/heads/-x"}, {Name: "branch.main.remote", Value: "-x"},
		{Name: "user.name", Value: "x\x1b[2K"}, {Name: "user\x1b.name", Value: "x"},
		{Name: "alias.st", Value: "status"}, {Name: "include.path", Value: "x"}, {Name: "submodule.lib.update", Value: "!x"},
	}
	for _, e := range refused {
		if Allowed(e) {
			t.Errorf("Allowed(%q = %q) = true", e.Name, e.Value)
		}
	}
}

func TestSafeRef(t *testing.T) {
	for _, r := range []string{"refs/heads/main", "refs/heads/feat/x-1.2_y"} {
		if !SafeRef(r) {
			t.Errorf("SafeRef(%q) = false", r)
		}
	}
	for _, r := range []string{"refs/heads/--upload-pack=x", "refs/heads/-x", "refs/heads/a..b", "refs/heads/.x", "refs/heads/a//b",
		"refs/heads/a/", "refs/heads/a.lock", "refs/tags/v1", "refs/heads/a b", "refs/heads/a\nb", "HEAD", "refs/heads/"} {
		if SafeRef(r) {
			t.Errorf("SafeRef(%q) = true", r)
		}
	}
}
