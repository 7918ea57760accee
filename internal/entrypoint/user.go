package entrypoint

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
func LookupAccount(root, name string) (Account, error) {
	a := Account{Name: name}
	passwd := filepath.Join(root, "etc/passwd")
	f, err := os.Open(passwd)
	if err != nil {
		return a, fmt.Errorf("user %q: %w", name, err)
	}
	defer f.Close()
	found := false
	err = eachLine(f, func(fields []string) error {
		if len(fields) < 7 || fields[0] != name {
			return nil
		}
		uid, err1 := strconv.Atoi(fields[2])
		gid, err2 := strconv.Atoi(fields[3])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("%s: bad uid/gid for %q", passwd, name)
		}
		a.UID, a.GID, a.Home, a.Shell = uid, gid, fields[5], fields[6]
		found = true
		return io.EOF
	})
	if err != nil {
		return a, err
	}
	if !found {
		return a, fmt.Errorf("user %q not found in %s", name, passwd)
	}
	g, err := os.Open(filepath.Join(root, "etc/group"))
	if err != nil {
		return a, fmt.Errorf("user %q: %w", name, err)
	}
	defer g.Close()
	err = eachLine(g, func(fields []string) error {
		if len(fields) < 4 {
			return nil
		}
		gid, err := strconv.Atoi(fields[2])
		if err != nil || gid == a.GID {
			return nil
		}
		for _, m := range strings.Split(fields[3], ",") {
			if m == name {
				a.Groups = append(a.Groups, gid)
				break
			}
		}
		return nil
	})
	return a, err
}

// eachLine calls fn with the colon-separated fields of every non-comment
// line; fn returning io.EOF stops early without error.
func eachLine(r io.Reader, fn func([]string) error) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(strings.Split(line, ":")); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
	return sc.Err()
}
