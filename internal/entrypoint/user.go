package entrypoint

import (
	"fmt"
	"path/filepath"

	"github.com/moby/sys/user"
)

// Account is the identity commands run as after the fence is up.
type Account struct {
	Name   string
	UID    int
	GID    int
	Groups []int // supplementary groups, from /etc/group
	Home   string
	Shell  string
}

// LookupAccount finds name in root/etc/passwd and its supplementary groups
// in root/etc/group. root is "/" in production and a temporary directory in
// tests. The uid comes from the file at run time, never from the policy:
// the Dev Containers CLI remaps it (updateRemoteUserUID).
//
// The files are parsed by github.com/moby/sys/user (runc's parser), which
// reads an unparsable number as 0. Since 0 is root, an account other than
// root that comes out as uid or gid 0 is refused, and a supplementary group that
// comes out as gid 0 is dropped unless it is the group named root: a typo in
// /etc/passwd must never turn the drop into a drop to root.
func LookupAccount(root, name string) (Account, error) {
	a := Account{Name: name}
	passwd := filepath.Join(root, "etc/passwd")
	users, err := user.ParsePasswdFileFilter(passwd, func(u user.User) bool { return u.Name == name })
	if err != nil {
		return a, fmt.Errorf("user %q: %w", name, err)
	}
	if len(users) == 0 {
		return a, fmt.Errorf("user %q not found in %s", name, passwd)
	}
	u := users[0] // first match wins, as for getpwnam(3)
	if name != "root" && (u.Uid == 0 || u.Gid == 0) {
		return a, fmt.Errorf("%s: bad uid/gid for %q", passwd, name)
	}
	a.UID, a.GID, a.Home, a.Shell = u.Uid, u.Gid, u.Home, u.Shell
	groups, err := user.ParseGroupFileFilter(filepath.Join(root, "etc/group"), func(g user.Group) bool {
		if g.Gid == a.GID || g.Gid == 0 && g.Name != "root" {
			return false
		}
		for _, m := range g.List {
			if m == name {
				return true
			}
		}
		return false
	})
	if err != nil {
		return a, fmt.Errorf("user %q: %w", name, err)
	}
	for _, g := range groups {
		a.Groups = append(a.Groups, g.Gid)
	}
	return a, nil
}
