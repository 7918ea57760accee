package sandbox

// The mandatory write-deny lists. No policy can lift them: each names a file
// that something runs or trusts later, outside the sandbox, with the user's
// full rights (a shell at login, git on the next commit, an editor or agent
// when it opens the folder). At the home and the workspace root they are
// protected whether or not they exist: a missing one gets an empty read-only
// placeholder, so it cannot be created from inside either. Below the
// workspace root, the ones that exist at launch are read-only (Plan finds
// them with one walk); one created during the run is reported by the audit
// at the end of the run (Audit), since no mount can cover a directory that
// did not exist when the sandbox started.

// DangerousFiles are file names protected at any depth of the workspace:
// sandbox-runtime's DANGEROUS_FILES.
var DangerousFiles = []string{
	".bashrc", ".bash_profile", ".zshrc", ".zprofile", ".profile",
	".gitconfig", ".gitmodules", ".ripgreprc", ".mcp.json",
}

// DangerousDirs are directories protected at any depth of the workspace:
// sandbox-runtime's dangerous directories. Every git repository's hooks
// directory and config (gitDangerous) are protected at any depth too.
var DangerousDirs = []string{".vscode", ".idea", ".claude/commands", ".claude/agents"}

// gitDangerous are the parts of a git directory that run code or choose
// what runs (core.hooksPath, filters, aliases): in every repository of the
// workspace, nested ones included.
var gitDangerous = []string{".git/hooks", ".git/config"}

// MandatoryHomeDenyWrite are relative to the user's home.
var MandatoryHomeDenyWrite = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zprofile", ".zshenv", ".zlogin",
	".gitconfig", ".config/git",
	".ssh/authorized_keys", ".ssh/config",
	".claude/settings.json", ".claude/commands", ".claude/agents",
	".mcp.json", ".ripgreprc",
	// The run-end audit's state (RunStateDir's parent): the baseline the
	// next run compares with.
	".local/state/devbox",
}

// MandatoryWorkspaceDenyWrite are relative to the workspace root (and to
// the command's directory): the lists above, and what only the root holds.
var MandatoryWorkspaceDenyWrite = concat(DangerousFiles, DangerousDirs, gitDangerous, []string{
	".claude/settings.json", ".claude/settings.local.json", ".devcontainer",
	// direnv runs .envrc when a shell enters the folder; husky's scripts
	// are git hooks by another name.
	".envrc", ".husky",
})

// placeholderDirs are the mandatory names that are directories when they
// exist; a missing one is blocked by an empty directory, the others by an
// empty file, so that tools meeting the placeholder see the right kind.
var placeholderDirs = map[string]bool{
	".config/git": true, ".claude/commands": true, ".claude/agents": true,
	".git/hooks": true, ".vscode": true, ".idea": true, ".devcontainer": true,
	".husky": true, ".local/state/devbox": true,
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
