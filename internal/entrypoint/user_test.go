package entrypoint

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/devbox-dev/devbox/internal/devboxtest"
)

func TestLookupAccount(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte(`root:x:0:0:root:/root:/bin/bash
# comment
devbox-dns:x:998:998::/nonexistent:/usr/sbin/nologin
dev:x:1001:1002:Dev:/home/dev:/bin/bash
broken:x:abc:1::/:/bin/sh
toor:x:0:0::/root:/bin/sh
badgid:x:1003:xyz::/:/bin/sh
`), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte(`root:x:0:
dev:x:1002:
docker:x:999:dev,other
video:x:44:other
users:x:100:dev
wheel:x:abc:dev
`), 0o644)
	for _, tc := range []struct {
		name    string
		want    Account
		wantErr string
	}{
		{name: "dev", want: Account{Name: "dev", UID: 1001, GID: 1002, Groups: []int{999, 100}, Home: "/home/dev", Shell: "/bin/bash"}},
		{name: "devbox-dns", want: Account{Name: "devbox-dns", UID: 998, GID: 998, Home: "/nonexistent", Shell: "/usr/sbin/nologin"}},
		{name: "nobody", wantErr: `user "nobody" not found in`},
		{name: "broken", wantErr: `bad uid/gid for "broken"`},
		// The parser reads a bad number as 0: never let that become root.
		{name: "toor", wantErr: `bad uid/gid for "toor"`},
		{name: "badgid", wantErr: `bad uid/gid for "badgid"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LookupAccount(root, tc.name)
			if devboxtest.WantErr(t, err, tc.wantErr) {
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestUserEnv(t *testing.T) {
	got := userEnv([]string{"PATH=/bin", "HOME=/root", "USER=root", "TERM=xterm"}, Account{Name: "dev", Home: "/home/dev", Shell: "/bin/sh"})
	want := []string{"PATH=/bin", "TERM=xterm", "HOME=/home/dev", "USER=dev", "LOGNAME=dev", "SHELL=/bin/sh"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
