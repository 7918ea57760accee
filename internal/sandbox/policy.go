package sandbox

import "github.com/devbox-dev/devbox/internal/policy"

// ConfigFromPolicy turns a policy's sandbox section into a Config for one
// run of command in workspace. The mandatory write denies are not part of
// the policy: Plan adds them whatever the policy says.
func ConfigFromPolicy(s policy.Sandbox, home, workspace string, command []string) Config {
	return Config{
		Home:       home,
		Workspace:  workspace,
		AllowWrite: append([]string(nil), s.AllowWrite...),
		DenyRead:   append([]string(nil), s.DenyRead...),
		DenyWrite:  append([]string(nil), s.DenyWrite...),
		NewSession: true,
		Command:    command,
	}
}
