package policy

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the policy package to the standard library and
// hujson: it is imported by the in-container entrypoint and the firewall,
// and a policy must mean the same thing wherever it is read.
func TestDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Standard", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/devbox-dev/devbox/internal/policy":     true,
		"github.com/devbox-dev/devbox/internal/atomicfile": true, // stdlib only
		"github.com/devbox-dev/devbox/internal/layout":     true, // imports nothing
		"github.com/tailscale/hujson":                      true,
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for dec.More() {
		var pkg struct {
			ImportPath string
			Standard   bool
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		n++
		if !pkg.Standard && !allowed[pkg.ImportPath] {
			t.Errorf("internal/policy depends on %s; only the standard library and hujson are allowed", pkg.ImportPath)
		}
	}
	if n < 10 {
		t.Fatalf("go list printed only %d packages", n)
	}
}
