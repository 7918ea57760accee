package features

import (
	"os/exec"
	"strings"
	"testing"
)

// TestInstallRejectsBadOptions runs install.sh with hostile option values:
// each must stop the build with a message naming the option, before
// anything is installed (validation runs first, so this needs no root).
func TestInstallRejectsBadOptions(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"ALLOW=a.test;touch /tmp/x"}, "option allow"},
		{[]string{"ALLOW=a.test$(id)"}, "option allow"},
		{[]string{"ALLOW=a\x01b.test"}, "option allow"},
		{[]string{"ALLOW=a b.test"}, "option allow"},
		{[]string{"ALLOW=*"}, `"*" would allow everything`},
		{[]string{"ALLOW=*.com"}, "two labels after"},
		{[]string{"ALLOW=a.test,,b.test"}, "empty entry"},
		{[]string{"PRESETS=anthropic,evil"}, `unknown preset "evil"`},
		{[]string{"CLAUDECODE=latest"}, "not an exact X.Y.Z"},
		{[]string{"CLAUDECODE=1.2"}, "not an exact X.Y.Z"},
		{[]string{"CLAUDECODE=1.2.3.4"}, "not an exact X.Y.Z"},
		{[]string{"CLAUDECODE=2.1.332"}, "not pinned in this feature package"},
		{[]string{"SANDBOX=yes"}, "option sandbox"},
		{[]string{"POLICYFILE=../../etc/shadow"}, "option policyFile"},
		{[]string{"POLICYFILE=/etc/shadow"}, "option policyFile"},
		// Valid options get past validation and stop at the missing payload.
		{[]string{"ALLOW=api.example.test:443,10.0.0.0/8,*.svc.example.test"}, "no devbox binary"},
	}
	for _, tt := range tests {
		cmd := exec.Command("sh", "src/devbox/install.sh")
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, tt.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tt.want) {
			t.Errorf("%q: err %v, output %q, want %q", tt.env, err, out, tt.want)
		}
	}
}
