package gitaudit

import "strings"

// Dangerous reports whether git may run a program named by, or be
// redirected to one by, the config variable name (canonical form, see
// Entry.Name). It is the one list of such keys in devbox: the host-side
// audit and the in-container checks share it.
//
// The list errs on the side of reporting: every key whose value git runs
// as a command or a program (core.fsmonitor, core.sshCommand, core.pager,
// core.editor, filter.*.clean/smudge/process, diff.*.textconv,
// credential.helper, ...), every key that makes git read more config
// (include.path, includeIf.*.path), aliases (a "!" alias is a shell
// command, and any alias can carry -c options), pagers per command, and
// keys that move the hooks or the work tree (core.hooksPath,
// core.worktree). Keys git reads only from protected config
// (safe.directory, uploadpack.packObjectsHook) are listed anyway: a
// nested repository's config may become someone's protected config.
func Dangerous(name string) bool {
	section, sub, key := splitName(strings.ToLower(name))
	if exact[section+"."+key] && sub == "" {
		return true
	}
	switch section {
	case "alias", "pager":
		// alias.NAME, pager.CMD: every one.
		return true
	case "include":
		return key == "path"
	case "includeif":
		return key == "path"
	case "filter":
		return key == "clean" || key == "smudge" || key == "process"
	case "diff":
		return key == "textconv" || key == "command" || key == "external"
	case "merge":
		return key == "driver"
	case "credential":
		return key == "helper"
	case "remote":
		// Programs run on the other end of a local or ssh transport, and
		// remote helpers (git-remote-VCS).
		return key == "uploadpack" || key == "receivepack" || key == "vcs" || key == "proxy"
	case "submodule":
		// submodule.NAME.update = !command runs the command on update.
		return key == "update"
	case "man", "browser", "difftool", "mergetool":
		return key == "cmd" || key == "path"
	case "gpg":
		return key == "program" || key == "defaultkeycommand"
	case "color":
		// color.pager is a boolean.
		return false
	}
	// Any other key named for a program git runs.
	for _, suffix := range programSuffixes {
		if strings.HasSuffix(key, suffix) {
			return true
		}
	}
	return false
}

// exact are section.key names (no subsection) git runs or obeys.
var exact = map[string]bool{
	"core.hookspath":             true,
	"core.fsmonitor":             true,
	"core.sshcommand":            true,
	"core.pager":                 true,
	"core.editor":                true,
	"core.askpass":               true,
	"core.gitproxy":              true,
	"core.alternaterefscommand":  true,
	"core.worktree":              true,
	"diff.external":              true,
	"sequence.editor":            true,
	"interactive.difffilter":     true,
	"uploadpack.packobjectshook": true,
	"web.browser":                true,
	"init.templatedir":           true,
	"sendemail.smtpserver":       true,
	"ssh.variant":                true,
	"safe.directory":             true,
	"extensions.worktreeconfig":  true,
}

// programSuffixes catch keys this list does not name, from newer git
// versions or less common commands: trailer.*.command, sendemail.toCmd,
// gpg.ssh.program, ...
var programSuffixes = []string{"command", "cmd", "program", "helper", "driver", "editor", "pager", "textconv", "hook", "hookspath"}
