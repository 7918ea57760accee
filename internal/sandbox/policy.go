package sandbox

import "github.com/devbox-dev/devbox/internal/policy"

// ToolchainCaches are the package managers' and compilers' caches, writable
// under `devbox run` whatever the policy says, so `npm ci`, `pip install` and
// `go build` work in the sandbox: npm's (~/.npm), pip's and Go's build cache
// (~/.cache), Go's module cache (~/go, or /go in the official Go images).
// The image creates the ones in the home, owned by the user; the others
// count only when the base has them.
var ToolchainCaches = []string{"~/.cache", "~/.npm", "~/go", "/go"}

// ConfigFromPolicy turns a policy's sandbox section into a Config for one
// run of command in workspace. The mandatory write denies are not part of
// the policy: Plan adds them whatever the policy says.
func ConfigFromPolicy(s policy.Sandbox, home, workspace string, command []string) Config {
	return Config{
		Home:       home,
		Workspace:  workspace,
		AllowWrite: append([]string(nil), s.AllowWrite...),
		Caches:     append([]string(nil), ToolchainCaches...),
		DenyRead:   append([]string(nil), s.DenyRead...),
		DenyWrite:  append([]string(nil), s.DenyWrite...),
		NewSession: true,
		Command:    command,
	}
}
