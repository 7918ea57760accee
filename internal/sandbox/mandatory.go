package sandbox

// The mandatory write-deny lists. No policy can lift them: each names a file
// that something runs or trusts later, outside the sandbox, with the user's
// full rights (a shell at login, git on the next commit, an editor or agent
// when it opens the folder). They are protected whether or not they exist: a
// missing one gets an empty read-only placeholder, so it cannot be created
// from inside either.

// MandatoryHomeDenyWrite are relative to the user's home.
var MandatoryHomeDenyWrite = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zprofile", ".zshenv", ".zlogin",
	".gitconfig", ".config/git",
	".ssh/authorized_keys", ".ssh/config",
	".claude/settings.json", ".claude/commands", ".claude/agents",
	".mcp.json",
}

// MandatoryWorkspaceDenyWrite are relative to the workspace.
var MandatoryWorkspaceDenyWrite = []string{
	".gitmodules", ".git/hooks", ".git/config",
	".mcp.json",
	".claude/commands", ".claude/agents", ".claude/settings.json", ".claude/settings.local.json",
	".vscode", ".idea", ".devcontainer",
	// direnv runs .envrc when a shell enters the folder; husky's scripts
	// are git hooks by another name.
	".envrc", ".husky",
}

// placeholderDirs are the mandatory names that are directories when they
// exist; a missing one is blocked by an empty directory, the others by an
// empty file, so that tools meeting the placeholder see the right kind.
var placeholderDirs = map[string]bool{
	".config/git": true, ".claude/commands": true, ".claude/agents": true,
	".git/hooks": true, ".vscode": true, ".idea": true, ".devcontainer": true,
	".husky": true,
}
