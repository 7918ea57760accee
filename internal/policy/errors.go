package policy

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoPolicy is wrapped by Load when the policy file does not exist, so
// callers can tell "missing" from "invalid" with errors.Is.
var ErrNoPolicy = errors.New("no policy file")

// Error is one problem in a policy file. Line and Col are 1-based and point
// into the original text (comments included) at the offending key or value;
// Col counts characters, not bytes. Line is 0 when the problem has no single
// place (for example a policy built in Go and checked by Validate).
type Error struct {
	File      string
	Line, Col int
	// Path is the key path, as in "network.allow[2]" ("" for the whole file).
	Path string
	Msg  string
}

func (e Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d:", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one policy, in file order. Parse and
// Load return a *Errors whenever the file was read but did not validate.
type Errors struct {
	List []Error
}

var _ error = (*Errors)(nil)

// Error prints one problem per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, x := range e.List {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find each Error.
func (e *Errors) Unwrap() []error {
	out := make([]error, len(e.List))
	for i, x := range e.List {
		out[i] = x
	}
	return out
}
