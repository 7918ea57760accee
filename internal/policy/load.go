package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tailscale/hujson"
)

// MaxFileSize is the largest policy file Parse accepts.
const MaxFileSize = 1 << 20

// Load reads and validates the policy file at path. A missing file returns
// an error wrapping ErrNoPolicy; an invalid one returns a *Errors naming
// every problem with path:line:col.
func Load(path string) (*Policy, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, ErrNoPolicy)
		}
		return nil, fmt.Errorf("reading policy: %w", err)
	}
	return Parse(path, raw)
}

// Parse validates a HuJSON policy (JSON with comments and trailing commas)
// and returns it with defaults applied, presets expanded, lists sorted and
// folded and allow entries covered by a deny removed. name is used in error
// positions and stored in Policy.Path. Every problem is reported at once in
// a *Errors; on error the Policy is nil.
func Parse(name string, raw []byte) (*Policy, error) {
	ex, err := parse(name, raw)
	if err != nil {
		return nil, err
	}
	return ex.Policy, nil
}

// parse does the work for Parse and Explain.
func parse(name string, raw []byte) (*Explanation, error) {
	d := &decoder{file: name, src: raw, seen: map[string]bool{}, pos: map[string]Position{}, elem: map[string]string{}}
	p := defaultPolicy()
	p.Path = name
	// A policy is a few kilobytes; the limit keeps a runaway file (or deep
	// nesting, which the hujson parser handles recursively) from costing
	// more than a quick error.
	if len(raw) > MaxFileSize {
		d.errs = append(d.errs, Error{File: name, Msg: fmt.Sprintf("the file is %d bytes; a policy is at most %d", len(raw), MaxFileSize)})
		return nil, d.result()
	}
	if i := invalidUTF8(raw); i >= 0 {
		d.errAtOffset(i, "", "the file is not valid UTF-8")
		return nil, d.result()
	}
	v, err := hujson.Parse(raw)
	if err != nil {
		d.syntaxError(err)
		return nil, d.result()
	}
	var notes decodeNotes
	d.policy(&v, p, &notes)
	if len(d.errs) > 0 {
		return nil, d.result()
	}
	ex := finish(p, &notes, d.seen)
	ex.positions, ex.elems = d.pos, d.elem
	if errs := append(credentialHostErrors(ex), loginErrors(ex)...); len(errs) > 0 {
		return nil, &Errors{List: errs}
	}
	return ex, nil
}

func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// decodeNotes carries what Parse learned that the Policy itself does not
// keep, for Explain.
type decodeNotes struct {
	// explicitAllow are the allow entries written in the file, and
	// explicitAllowAt their key paths ("network.allow[3]").
	explicitAllow   []Destination
	explicitAllowAt []string
	// presetAt maps each preset named in the file to its key path.
	presetAt map[string]string
}

// decoder walks the hujson tree of the original text, so every error can
// point at the offending key or value in the file as the user wrote it.
type decoder struct {
	file string
	src  []byte
	errs []Error
	// seen records the key paths present in the file, to tell which
	// defaults applied.
	seen map[string]bool
	// pos records where each key's value and each array element starts.
	pos map[string]Position
	// elem maps a list's key path and an element's canonical value to the
	// element's key path ("sandbox.allowWrite\x00/x" → "sandbox.allowWrite[1]").
	elem map[string]string
}

func (d *decoder) result() error {
	if len(d.errs) == 0 {
		return nil
	}
	return &Errors{List: d.errs}
}

func (d *decoder) position(off int) (line, col int) {
	if off > len(d.src) {
		off = len(d.src)
	}
	before := d.src[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col = 1 + utf8.RuneCount(before[lineStart:])
	return line, col
}

func (d *decoder) positionOf(off int) Position {
	line, col := d.position(off)
	return Position{Line: line, Col: col}
}

func (d *decoder) errAtOffset(off int, path, format string, args ...any) {
	line, col := d.position(off)
	d.errs = append(d.errs, Error{File: d.file, Line: line, Col: col, Path: printable(path), Msg: printable(fmt.Sprintf(format, args...))})
}

// printable escapes control characters and invalid UTF-8, so an error
// message never carries a raw NUL or a terminal escape sequence from the
// file to the user's terminal.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (d *decoder) errAt(v *hujson.Value, path, format string, args ...any) {
	d.errAtOffset(v.StartOffset, path, format, args...)
}

var hujsonPos = regexp.MustCompile(`(?s)^hujson: line (\d+), column (\d+): (.*)$`)

// syntaxError turns a hujson parse error into an Error at its position.
func (d *decoder) syntaxError(err error) {
	m := hujsonPos.FindStringSubmatch(err.Error())
	if m == nil {
		d.errs = append(d.errs, Error{File: d.file, Msg: printable("syntax error: " + err.Error())})
		return
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	d.errs = append(d.errs, Error{File: d.file, Line: line, Col: col, Msg: printable("syntax error: " + m[3])})
}

func kindName(v *hujson.Value) string {
	switch v.Value.Kind() {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "an unknown value"
}

func (d *decoder) wrongType(v *hujson.Value, path, want string) {
	if v.Value.Kind() == 'n' {
		d.errAt(v, path, "want %s, got null (leave the key out to get the default)", want)
		return
	}
	d.errAt(v, path, "want %s, got %s", want, kindName(v))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// field is one key of an object and how to decode its value.
type field struct {
	name   string
	decode func(v *hujson.Value, path string)
}

// object checks that v is an object whose keys are all known and unique,
// and decodes each known key.
func (d *decoder) object(v *hujson.Value, path string, fields ...field) {
	obj, ok := v.Value.(*hujson.Object)
	if !ok {
		d.wrongType(v, path, "an object")
		return
	}
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.name
	}
	done := map[string]bool{}
	for i := range obj.Members {
		m := &obj.Members[i]
		key := m.Name.Value.(hujson.Literal).String()
		kpath := join(path, key)
		if done[key] {
			d.errAt(&m.Name, kpath, "duplicate key %q", key)
			continue
		}
		done[key] = true
		var f *field
		for j := range fields {
			if fields[j].name == key {
				f = &fields[j]
			}
		}
		if f == nil {
			where := "at the top level"
			if path != "" {
				where = "in " + path
			}
			d.errAt(&m.Name, kpath, "unknown key %q %s (known keys: %s)", key, where, strings.Join(known, ", "))
			continue
		}
		d.seen[kpath] = true
		d.pos[kpath] = d.positionOf(m.Value.StartOffset)
		f.decode(&m.Value, kpath)
	}
}

func (d *decoder) str(v *hujson.Value, path string) (string, bool) {
	lit, ok := v.Value.(hujson.Literal)
	if !ok || lit.Kind() != '"' {
		d.wrongType(v, path, "a string")
		return "", false
	}
	return lit.String(), true
}

func (d *decoder) boolean(v *hujson.Value, path string) (bool, bool) {
	lit, ok := v.Value.(hujson.Literal)
	if !ok || (lit.Kind() != 't' && lit.Kind() != 'f') {
		d.wrongType(v, path, "true or false")
		return false, false
	}
	return lit.Bool(), true
}

func (d *decoder) integer(v *hujson.Value, path string) (int, bool) {
	lit, ok := v.Value.(hujson.Literal)
	if !ok || lit.Kind() != '0' {
		d.wrongType(v, path, "an integer")
		return 0, false
	}
	n, err := strconv.ParseInt(string(lit), 10, 32)
	if err != nil {
		d.errAt(v, path, "want an integer, got %s", lit)
		return 0, false
	}
	return int(n), true
}

// array calls each for every element of an array, with its path.
func (d *decoder) array(v *hujson.Value, path string, each func(v *hujson.Value, path string)) {
	arr, ok := v.Value.(*hujson.Array)
	if !ok {
		d.wrongType(v, path, "an array")
		return
	}
	for i := range arr.Elements {
		p := fmt.Sprintf("%s[%d]", path, i)
		d.pos[p] = d.positionOf(arr.Elements[i].StartOffset)
		each(&arr.Elements[i], p)
	}
}

// strings decodes an array of strings, checking each with check, which
// returns the canonical value or a reason.
func (d *decoder) strings(v *hujson.Value, path string, check func(string) (string, string)) []string {
	return checkedList(d, v, path, check)
}

// checkedList decodes an array of strings into values of T, checking each
// with check, which returns the value or a reason the string is refused.
func checkedList[T any](d *decoder, v *hujson.Value, path string, check func(string) (T, string)) []T {
	out := []T{}
	d.array(v, path, func(e *hujson.Value, p string) {
		c, ok := checkedString(d, e, p, check)
		if !ok {
			return
		}
		key := path + "\x00" + fmt.Sprint(c)
		if _, ok := d.elem[key]; !ok {
			d.elem[key] = p
		}
		out = append(out, c)
	})
	return out
}

// destinations decodes an allow (allow is true) or deny list; at receives
// the key path of each entry kept.
func (d *decoder) destinations(v *hujson.Value, path string, allow bool, at *[]string) []Destination {
	out := []Destination{}
	d.array(v, path, func(e *hujson.Value, p string) {
		s, ok := d.str(e, p)
		if !ok {
			return
		}
		dest, err := ParseDestination(s)
		if err != nil {
			d.errAt(e, p, "%q: %s", s, err.(*DestinationError).Reason)
			return
		}
		if allow && dest.Kind == Prefix && dest.Prefix.Bits() == 0 {
			d.errAt(e, p, "%q: would allow every address; list the ranges you need", s)
			return
		}
		out = append(out, dest)
		if at != nil {
			*at = append(*at, p)
		}
	})
	return out
}

// checked decodes a string and validates it with check.
func (d *decoder) checked(v *hujson.Value, path string, dst *string, check func(string) (string, string)) {
	if c, ok := checkedString(d, v, path, check); ok {
		*dst = c
	}
}

// checkedString decodes a string at path and checks it with check, which
// returns the value or a reason the string is refused (reported at v).
func checkedString[T any](d *decoder, v *hujson.Value, path string, check func(string) (T, string)) (T, bool) {
	var zero T
	s, ok := d.str(v, path)
	if !ok {
		return zero, false
	}
	c, reason := check(s)
	if reason != "" {
		d.errAt(v, path, "%q: %s", s, reason)
		return zero, false
	}
	return c, true
}

func (d *decoder) policy(v *hujson.Value, p *Policy, notes *decodeNotes) {
	d.object(v, "",
		field{"image", func(v *hujson.Value, path string) { d.image(v, path, &p.Image) }},
		field{"agent", func(v *hujson.Value, path string) {
			d.object(v, path,
				field{"claudeCode", func(v *hujson.Value, path string) {
					d.checked(v, path, &p.Agent.ClaudeCode, checkClaudeCode)
				}},
				field{"login", func(v *hujson.Value, path string) {
					d.checked(v, path, &p.Agent.Login, checkLogin)
				}},
			)
		}},
		field{"network", func(v *hujson.Value, path string) { d.network(v, path, &p.Network, notes) }},
		field{"sandbox", func(v *hujson.Value, path string) { d.sandbox(v, path, &p.Sandbox) }},
		field{"credentials", func(v *hujson.Value, path string) { d.credentials(v, path, &p.Credentials) }},
	)
}

func (d *decoder) image(v *hujson.Value, path string, img *Image) {
	d.object(v, path,
		field{"base", func(v *hujson.Value, path string) { d.checked(v, path, &img.Base, checkBaseRef) }},
		field{"user", func(v *hujson.Value, path string) {
			d.object(v, path,
				field{"name", func(v *hujson.Value, path string) { d.checked(v, path, &img.User.Name, checkUserName) }},
				field{"uid", func(v *hujson.Value, path string) { d.id(v, path, &img.User.UID) }},
				field{"gid", func(v *hujson.Value, path string) { d.id(v, path, &img.User.GID) }},
			)
		}},
		field{"packages", func(v *hujson.Value, path string) { img.Packages = d.strings(v, path, checkPackage) }},
		field{"tag", func(v *hujson.Value, path string) { d.checked(v, path, &img.Tag, checkPushTag) }},
	)
}

func (d *decoder) id(v *hujson.Value, path string, dst *int) {
	n, ok := d.integer(v, path)
	if !ok {
		return
	}
	if reason := checkID(n); reason != "" {
		d.errAt(v, path, "%d: %s", n, reason)
		return
	}
	*dst = n
}

func (d *decoder) network(v *hujson.Value, path string, n *Network, notes *decodeNotes) {
	d.object(v, path,
		field{"presets", func(v *hujson.Value, path string) {
			n.Presets = d.strings(v, path, checkPreset)
			notes.presetAt = map[string]string{}
			if arr, ok := v.Value.(*hujson.Array); ok {
				for i := range arr.Elements {
					if lit, ok := arr.Elements[i].Value.(hujson.Literal); ok && lit.Kind() == '"' {
						if _, dup := notes.presetAt[lit.String()]; !dup {
							notes.presetAt[lit.String()] = fmt.Sprintf("%s[%d]", path, i)
						}
					}
				}
			}
		}},
		field{"allow", func(v *hujson.Value, path string) {
			n.Allow = d.destinations(v, path, true, &notes.explicitAllowAt)
			notes.explicitAllow = n.Allow
		}},
		field{"deny", func(v *hujson.Value, path string) { n.Deny = d.destinations(v, path, false, nil) }},
		field{"dns", func(v *hujson.Value, path string) {
			d.object(v, path, field{"upstream", func(v *hujson.Value, path string) {
				n.DNS.Upstream = checkedList(d, v, path, parseUpstream)
			}})
		}},
		field{"log", func(v *hujson.Value, path string) {
			d.object(v, path,
				field{"blocked", func(v *hujson.Value, path string) {
					if b, ok := d.boolean(v, path); ok {
						n.Log.Blocked = b
					}
				}},
				field{"file", func(v *hujson.Value, path string) { d.checked(v, path, &n.Log.File, checkLogFile) }},
			)
		}},
		field{"quic", func(v *hujson.Value, path string) {
			if b, ok := d.boolean(v, path); ok {
				n.QUIC = b
			}
		}},
	)
}

func (d *decoder) sandbox(v *hujson.Value, path string, s *Sandbox) {
	d.object(v, path,
		field{"enabled", func(v *hujson.Value, path string) {
			if b, ok := d.boolean(v, path); ok {
				s.Enabled = b
			}
		}},
		// The default denyRead entries are always kept: the file adds to
		// them, it cannot lift them.
		field{"denyRead", func(v *hujson.Value, path string) {
			s.DenyRead = append(s.DenyRead, d.strings(v, path, checkSandboxPath)...)
		}},
		field{"allowWrite", func(v *hujson.Value, path string) { s.AllowWrite = d.strings(v, path, checkWritablePath) }},
		field{"denyWrite", func(v *hujson.Value, path string) { s.DenyWrite = d.strings(v, path, checkSandboxPath) }},
	)
}
