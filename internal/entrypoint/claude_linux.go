//go:build linux

package entrypoint

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// RepairClaudeState gives acct its Claude Code state directory back when
// something else owns it, and the state file inside it. A named volume
// that a devbox image without ~/.claude created is root:root 0755 (Docker
// takes a new volume's owner from the image's directory, and there was
// none), and the Dev Containers CLI may have remapped the user's uid since
// the volume was made (updateRemoteUserUID): either way Claude Code cannot
// write its login, settings or MCP servers.
//
// It runs as root on every start, on a directory the agent's user may have
// prepared in an earlier session, so it touches exactly two inodes and
// follows no symbolic link on the way:
//   - dir, reached component by component from "/" with O_NOFOLLOW, must
//     be a directory inside acct's home; when acct does not own it it is
//     given to acct (fchown on the open descriptor, not recursive) with
//     mode 0700, what the image gives a fresh volume;
//   - dir/.claude.json, when it exists and acct does not own it, must be a
//     regular file with one link (a hard link could name any file) and is
//     given to acct.
//
// It returns what it changed, for the start-up log. Anything else (a link,
// not a directory, a path outside the home) is refused with an error and
// left as it is; a missing directory is not an error (Claude Code creates
// it).
func RepairClaudeState(acct Account, dir string) ([]string, error) {
	if err := checkClaudeDir(acct, dir); err != nil {
		return nil, err
	}
	if acct.UID == 0 || acct.GID == 0 {
		return nil, fmt.Errorf("%s: refusing to hand it to %s (uid %d gid %d)", dir, acct.Name, acct.UID, acct.GID)
	}
	fd, err := openDirNoFollow(dir)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var did []string
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if int(st.Uid) != acct.UID {
		if err := unix.Fchown(fd, acct.UID, acct.GID); err != nil {
			return nil, fmt.Errorf("%s: give it to %s: %w", dir, acct.Name, err)
		}
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return nil, fmt.Errorf("%s: chmod 0700: %w", dir, err)
		}
		did = append(did, fmt.Sprintf("%s (was uid %d, mode %04o) to %s (uid %d), mode 0700", dir, st.Uid, st.Mode&0o7777, acct.Name, acct.UID))
	}
	file := dir + "/" + ClaudeStateFile
	// O_PATH opens without reading: a FIFO planted here cannot block the
	// start, and a symbolic link is opened as itself and refused below.
	ffd, err := unix.Openat(fd, ClaudeStateFile, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return did, nil
	}
	if err != nil {
		return did, fmt.Errorf("%s: %w", file, err)
	}
	defer unix.Close(ffd)
	if err := unix.Fstat(ffd, &st); err != nil {
		return did, fmt.Errorf("%s: %w", file, err)
	}
	switch {
	case int(st.Uid) == acct.UID:
		return did, nil
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return did, fmt.Errorf("%s is not a regular file (%s): left as it is", file, fileType(st.Mode))
	case st.Nlink != 1:
		return did, fmt.Errorf("%s has %d hard links: left as it is (it could be any file)", file, st.Nlink)
	}
	if err := unix.Fchownat(ffd, "", acct.UID, acct.GID, unix.AT_EMPTY_PATH); err != nil {
		return did, fmt.Errorf("%s: give it to %s: %w", file, acct.Name, err)
	}
	return append(did, fmt.Sprintf("%s (was uid %d) to %s", file, st.Uid, acct.Name)), nil
}

// openDirNoFollow opens the absolute, clean path dir as a directory
// without following a symbolic link in any of its components. ENOENT
// comes back as is.
func openDirNoFollow(dir string) (int, error) {
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open /: %w", err)
	}
	at := ""
	for _, name := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		at += "/" + name
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			var st unix.Stat_t
			if serr := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil && (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
				err = fmt.Errorf("%s is a %s, not a directory: refused (no link is followed)", at, fileType(st.Mode))
			} else if !errors.Is(err, unix.ENOENT) {
				err = fmt.Errorf("%s: %w", at, err)
			}
			unix.Close(fd)
			return -1, err
		}
		unix.Close(fd)
		fd = next
	}
	return fd, nil
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "special file"
}
