package main

import (
	"context"
	"strings"
	"testing"
)

// TestPolicyArgument checks that lock and build take the policy as --policy
// or as one FILE argument, and refuse anything ambiguous instead of silently
// using another file.
func TestPolicyArgument(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "a.jsonc", "b.jsonc"}, "at most one policy FILE"},
		{[]string{"build", "a.jsonc", "b.jsonc"}, "at most one policy FILE"},
		{[]string{"lock", "--policy", "a.jsonc", "b.jsonc"}, "given twice"},
		{[]string{"lock", t.TempDir() + "/missing.jsonc"}, "missing.jsonc: no policy file"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := newApp().RunContext(context.Background(), append([]string{"devbox"}, tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
