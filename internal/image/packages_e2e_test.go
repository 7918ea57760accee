package image

import (
	"strings"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

// TestE2EPackagesKeepPerl runs the packages step's own script in the test
// base, with Debian's apt, for a policy whose image.packages need Perl:
// rename (Depends: perl:any, and Pod::Usage from perl-modules) and
// git-email (a Perl command that only depends on git). The lean excludes
// must give way: the step names both, Perl's modules are back, rename runs,
// and no devbox dpkg config is left behind. The default image's side (Perl
// left out, git still working) is TestE2EBuild's "inside".
func TestE2EPackagesKeepPerl(t *testing.T) {
	d := devboxtest.DockerCLI(t)
	base := devboxtest.Env(t, "DEVBOX_BASE_IMAGE")
	s := testSpec("2.1.332")
	s.Policy.Image.Packages = []string{"rename", "git-email"}
	steps, err := Steps(s)
	if err != nil {
		t.Fatal(err)
	}
	var script string
	for _, st := range steps {
		if st.Name == "packages" {
			script = st.Script
		}
	}
	if script == "" {
		t.Fatal("no packages step")
	}
	check := strings.Join([]string{
		"echo podusage=$(perl -MPod::Usage -e1 && echo yes)",
		"echo rename=$(rename -V >/dev/null && echo ok)",
		"echo gitdaemon=$(git daemon --version >/dev/null 2>&1 && echo yes || echo no)",
		"echo dpkgcfg=$(ls /etc/dpkg/dpkg.cfg.d | grep -c devbox)",
	}, "\n")
	out := d.Run(t, "run", "--rm", "--entrypoint", "/bin/sh", base, "-euc", script+"\n"+check) + "\n"
	for _, w := range []string{
		"devbox: keeping Perl whole, needed by: git-email rename\n",
		"podusage=yes\n", "rename=ok\n", "gitdaemon=no\n", "dpkgcfg=0\n",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("want %q in the step's output:\n%s", w, lastLines(out, 30))
		}
	}
}
