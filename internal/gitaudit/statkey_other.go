//go:build !linux

package gitaudit

import "io/fs"

// statKey is "" where the stat fields differ from Linux's (the audit then
// digests every file, as it does on a first run): devbox's audits run on
// Linux hosts and in containers; elsewhere they stay correct, only slower.
func statKey(fs.FileInfo) string { return "" }
