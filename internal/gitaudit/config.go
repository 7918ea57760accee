package gitaudit

import (
	"bytes"
	"fmt"
	"strings"
)

// Entry is one variable of a git config file, as git itself reads it.
type Entry struct {
	// Name is the canonical variable name: the section and the key
	// lowercased, the subsection as written ("remote.Origin.url"), or
	// lowercased for the old "[section.sub]" form, as git does.
	Name string
	// Value is the value after git's unquoting; NoValue marks a key
	// written alone ("[core] bare"), which git reads as boolean true.
	Value   string
	NoValue bool
	// Line is the 1-based line where the key starts.
	Line int
}

// Section, Subsection and Key split Name the way git does: at the first
// and the last dot (a subsection may itself contain dots).
func (e Entry) Section() string {
	s, _, _ := splitName(e.Name)
	return s
}

// Subsection is the part between the first and the last dot, or "".
func (e Entry) Subsection() string {
	_, sub, _ := splitName(e.Name)
	return sub
}

// Key is the part after the last dot.
func (e Entry) Key() string {
	_, _, k := splitName(e.Name)
	return k
}

func splitName(name string) (section, sub, key string) {
	first := strings.IndexByte(name, '.')
	last := strings.LastIndexByte(name, '.')
	if first < 0 {
		return "", "", name
	}
	if first == last {
		return name[:first], "", name[last+1:]
	}
	return name[:first], name[first+1 : last], name[last+1:]
}

// ParseConfig reads a git config file the way git 2.39's config.c
// (git_parse_source) does, byte for byte, so that what the audit sees is
// what git will see: a value git runs cannot hide from the audit in a
// corner of the syntax the two read differently. It follows git on every
// point an attacker controls: a key may follow "]" on the same line,
// "\r\n" is a newline, a UTF-8 BOM is skipped, "\" + newline continues a
// value, comments start with '#' or ';' outside quotes, whitespace in a
// value outside quotes collapses the way git's does. Where git would
// refuse the file (and so run nothing from it), ParseConfig returns an
// error naming the line; the entries read before it are returned too,
// because git acts on them before it dies.
//
// ParseConfig does not follow include.path: the caller decides how to
// treat includes.
func ParseConfig(src []byte) ([]Entry, error) {
	p := &configParser{src: src, line: 1}
	p.src = bytes.TrimPrefix(p.src, []byte("\xef\xbb\xbf"))
	return p.parse()
}

type configParser struct {
	src  []byte
	pos  int
	line int
	eof  bool
	out  []Entry
}

// next is git's get_next_char: "\r\n" reads as '\n', and the end of the
// input reads as a final '\n' with eof set.
func (p *configParser) next() byte {
	if p.pos >= len(p.src) {
		p.eof = true
		return '\n'
	}
	c := p.src[p.pos]
	p.pos++
	if c == '\r' && p.pos < len(p.src) && p.src[p.pos] == '\n' {
		c = '\n'
		p.pos++
	}
	if c == '\n' {
		p.line++
	}
	return c
}

func (p *configParser) errorf(line int, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
func isAlpha(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func isKeyChar(c byte) bool {
	return isAlpha(c) || (c >= '0' && c <= '9') || c == '-'
}
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func (p *configParser) parse() ([]Entry, error) {
	var base []byte // "section." or "section.subsection.", as git's var prefix
	comment := false
	for {
		c := p.next()
		if c == '\n' {
			if p.eof {
				return p.out, nil
			}
			comment = false
			continue
		}
		if comment || isSpace(c) {
			continue
		}
		if c == '#' || c == ';' {
			comment = true
			continue
		}
		if c == '[' {
			line := p.line
			b, err := p.section()
			if err != nil {
				return p.out, p.errorf(line, "bad section header: %v", err)
			}
			base = b
			continue
		}
		if !isAlpha(c) {
			return p.out, p.errorf(p.line, "bad config line: unexpected %q", c)
		}
		if err := p.entry(base, c); err != nil {
			return p.out, err
		}
	}
}

// section is git's get_base_var and get_extended_base_var. It returns the
// name prefix with its trailing dot.
func (p *configParser) section() ([]byte, error) {
	var name []byte
	for {
		c := p.next()
		if p.eof {
			return nil, fmt.Errorf("unterminated")
		}
		if c == ']' {
			return append(name, '.'), nil
		}
		if isSpace(c) {
			return p.extendedSection(name, c)
		}
		if !isKeyChar(c) && c != '.' {
			return nil, fmt.Errorf("unexpected %q", c)
		}
		name = append(name, lower(c))
	}
}

func (p *configParser) extendedSection(name []byte, c byte) ([]byte, error) {
	for isSpace(c) {
		if c == '\n' {
			return nil, fmt.Errorf("newline in section header")
		}
		c = p.next()
	}
	if c != '"' {
		return nil, fmt.Errorf("subsection must be quoted")
	}
	name = append(name, '.')
	for {
		c = p.next()
		if c == '\n' {
			return nil, fmt.Errorf("newline in subsection")
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			c = p.next()
			if c == '\n' {
				return nil, fmt.Errorf("newline in subsection")
			}
		}
		name = append(name, c)
	}
	if p.next() != ']' {
		return nil, fmt.Errorf("expected ']' after subsection")
	}
	return append(name, '.'), nil
}

// entry is git's get_value: the key, then an optional "= value".
func (p *configParser) entry(base []byte, first byte) error {
	line := p.line
	name := append(append([]byte(nil), base...), lower(first))
	var c byte
	for {
		c = p.next()
		if p.eof {
			break
		}
		if !isKeyChar(c) {
			break
		}
		name = append(name, lower(c))
	}
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	e := Entry{Name: string(name), Line: line}
	if c == '\n' {
		e.NoValue = true
		p.out = append(p.out, e)
		return nil
	}
	if c != '=' {
		return p.errorf(line, "bad config line: %q after key %q", c, name)
	}
	v, err := p.value()
	if err != nil {
		return p.errorf(line, "bad value of %s: %v", name, err)
	}
	e.Value = v
	p.out = append(p.out, e)
	return nil
}

// value is git's parse_value.
func (p *configParser) value() (string, error) {
	var v []byte
	quote, comment, space := false, false, 0
	for {
		c := p.next()
		if c == '\n' {
			if quote {
				return "", fmt.Errorf("unterminated quote")
			}
			return string(v), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			if len(v) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		if c == '\\' {
			c = p.next()
			switch c {
			case '\n':
				continue
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", fmt.Errorf("bad escape \\%c", c)
			}
			v = append(v, c)
			continue
		}
		if c == '"' {
			quote = !quote
			continue
		}
		v = append(v, c)
	}
}
