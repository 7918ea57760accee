package gitaudit

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// WriteText prints the diff for a terminal. Everything that came from the
// workspace is printed with control characters escaped, so a planted hook
// cannot hide its lines from the report with terminal escapes.
func (d *Diff) WriteText(w io.Writer) error {
	var b strings.Builder
	if d.OK() {
		fmt.Fprintf(&b, "devbox audit: %s: nothing new since the accepted state\n", d.Root)
		if len(d.Removed) > 0 {
			fmt.Fprintf(&b, "  (%d accepted entries are gone; `devbox audit --accept` forgets them)\n", len(d.Removed))
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if d.NoState {
		fmt.Fprintf(&b, "devbox audit: %s: no state was ever accepted for this workspace; every git directory, hook,\n"+
			"file that is not pure data, config key off the allow-list and file another tool runs is new. Review them:\n", d.Root)
	} else {
		fmt.Fprintf(&b, "devbox audit: %s: %d new or changed since the accepted state; host git, or the tool that reads them\n"+
			"(an editor, Claude Code, direnv, a hook manager), could run them:\n", d.Root, len(d.Changes))
	}
	for _, c := range d.Changes {
		b.WriteString("  " + c.String() + "\n")
		for _, l := range c.Head {
			b.WriteString("      | " + Printable(l) + "\n")
		}
	}
	b.WriteString("Remove what you did not put there (never run git in those repositories, nor open the workspace\n" +
		"in those tools, before you have), then record the rest with `devbox audit --accept`.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// String is the change on one line, as the report prints it.
func (c Change) String() string {
	f := c.Finding
	where := Printable(f.Path)
	if f.Line > 0 {
		where += ":" + strconv.Itoa(f.Line)
	}
	var what string
	switch f.Kind {
	case GitDir:
		what = "git directory"
	case GitLink:
		what = "points to git directory " + Printable(f.Value)
	case Symlink:
		what = "symbolic link to " + Printable(f.Value)
	case Hook:
		what = fmt.Sprintf("executable hook %s (%d bytes, %s)", Printable(f.Key), f.Size, shortDigest(f.Digest))
	case File:
		what = fmt.Sprintf("file in a git directory, not pure data (%d bytes, %s)", f.Size, shortDigest(f.Digest))
	case Sequencer:
		what = fmt.Sprintf("state of an interrupted rebase/cherry-pick (%d bytes, %s): `git rebase --continue` runs its exec lines", f.Size, shortDigest(f.Digest))
	case RunLater:
		what = fmt.Sprintf("read or run by another tool (%d bytes, %s)", f.Size, shortDigest(f.Digest))
	case Config:
		what = "git reads " + Printable(f.Key) + " = " + Printable(f.Value) + " (not on the allow-list)"
	case Unreadable:
		what = "cannot be checked: " + Printable(f.Value)
	}
	return fmt.Sprintf("%-8s %-10s %s  %s", c.Status, f.Kind, where, what)
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

// Printable escapes control and invalid bytes of s the way %q would, but
// leaves printable text (spaces, quotes, non-ASCII letters) as written.
func Printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteString(`\t`)
		case !unicode.IsPrint(r) && r != ' ':
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		i += n
	}
	return b.String()
}
