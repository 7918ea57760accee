package devcontainer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/tailscale/hujson"
)

// Change is one key-level edit that Patch made, in the words init prints.
type Change struct {
	// Path is the JSON key path, "/"-joined ("containerEnv/CLAUDE_CONFIG_DIR").
	Path string
	// Op is "add", "set", "remove" or "append" (an element added to an array).
	Op string
	// Old and New are the values as compact JSON ("" when absent).
	Old, New string
}

func (c Change) String() string {
	switch c.Op {
	case "add":
		return fmt.Sprintf("add %s = %s", c.Path, c.New)
	case "set":
		return fmt.Sprintf("set %s: %s -> %s", c.Path, c.Old, c.New)
	case "remove":
		return fmt.Sprintf("remove %s (was %s)", c.Path, c.Old)
	case "append":
		return fmt.Sprintf("add %s to %s", c.New, c.Path)
	}
	return c.Op + " " + c.Path
}

// ruleKind says how a rule brings a key to its desired state.
type ruleKind int

const (
	// set: the key must hold exactly the value.
	set ruleKind = iota
	// union: the key is an array that must contain every element of the
	// value; the user's other elements stay.
	union
	// remove: the key must be absent.
	remove
	// setIfAbsent: the key gets the value only when the user has none.
	setIfAbsent
	// removeIfEqual: the key is removed when it holds the value (init's
	// own earlier value), and left alone when the user wrote something else.
	removeIfEqual
	// setIfOwned: the key gets the value when absent or when owned says
	// the current value is init's own (an earlier version of it); a value
	// the user wrote stays.
	setIfOwned
	// block: the key is an array whose elements between BlockBegin and
	// BlockEnd comments are exactly the value, in order; the user's
	// elements and comments outside the block stay. Elements in legacy
	// (init's own, from before the block existed) are moved into it.
	block
)

// The comments around the part of an array init generates.
const (
	BlockBegin = "// devbox init: generated, rewritten by every `devbox init`; add yours outside this block"
	BlockEnd   = "// devbox init: end of generated block"
)

// rule is one desired property of devcontainer.json.
type rule struct {
	path  []string
	kind  ruleKind
	value any
	// owned says whether a current value is init's own (setIfOwned).
	owned func(any) bool
	// legacy are elements init wrote before the block existed (block).
	legacy []string
}

// patchJSONC brings the JSONC document src to the state the rules describe,
// editing only what differs: comments, key order and the user's formatting
// elsewhere are kept byte for byte. name is used in error messages. It
// returns the new document and the changes, in rule order; a document
// already in the desired state comes back unchanged, so patching is
// idempotent.
func patchJSONC(name string, src []byte, rules []rule) ([]byte, []Change, error) {
	root, err := hujson.Parse(src)
	if err != nil {
		return nil, nil, syntaxError(name, err)
	}
	obj, ok := root.Value.(*hujson.Object)
	if !ok {
		return nil, nil, fmt.Errorf("%s: the top-level value must be an object", name)
	}
	unit := indentUnit(obj)
	var changes []Change
	for _, r := range rules {
		c, err := applyRule(obj, unit, r)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", name, strings.Join(r.path, "."), err)
		}
		changes = append(changes, c...)
	}
	if len(changes) == 0 {
		return src, nil, nil
	}
	root.UpdateOffsets()
	return root.Pack(), changes, nil
}

var hujsonPos = regexp.MustCompile(`^hujson: line (\d+), column (\d+): (.*)$`)

// syntaxError rewrites hujson's "line L, column C" into the file:line:col
// form editors and terminals link to.
func syntaxError(name string, err error) error {
	if m := hujsonPos.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s:%s:%s: syntax error: %s", name, m[1], m[2], m[3])
	}
	return fmt.Errorf("%s: syntax error: %w", name, err)
}

func applyRule(root *hujson.Object, unit string, r rule) ([]Change, error) {
	// Walk to the object holding the last key, creating intermediate
	// objects only when something will be written there.
	obj, depth := root, 1
	for i, key := range r.path[:len(r.path)-1] {
		m := member(obj, key)
		if m == nil {
			if r.kind == remove || r.kind == removeIfEqual {
				return nil, nil
			}
			// Build the rest of the path as one nested value.
			v := r.value
			for j := len(r.path) - 1; j > i; j-- {
				v = map[string]any{r.path[j]: v}
			}
			if err := addMember(obj, depth, unit, key, v); err != nil {
				return nil, err
			}
			return []Change{{Path: strings.Join(r.path, "/"), Op: "add", New: compact(r.value)}}, nil
		}
		child, ok := m.Value.Value.(*hujson.Object)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", key)
		}
		obj, depth = child, depth+1
	}
	key := r.path[len(r.path)-1]
	path := strings.Join(r.path, "/")
	i := memberIndex(obj, key)
	if r.kind == block {
		if i < 0 {
			if err := addMember(obj, depth, unit, key, []any{}); err != nil {
				return nil, err
			}
			i = memberIndex(obj, key)
		}
		arr, ok := obj.Members[i].Value.Value.(*hujson.Array)
		if !ok {
			return nil, fmt.Errorf("is not an array")
		}
		return applyBlock(arr, depth, unit, path, r.value.([]string), r.legacy), nil
	}
	if i < 0 {
		if r.kind == remove || r.kind == removeIfEqual {
			return nil, nil
		}
		if err := addMember(obj, depth, unit, key, r.value); err != nil {
			return nil, err
		}
		return []Change{{Path: path, Op: "add", New: compact(r.value)}}, nil
	}
	m := &obj.Members[i]
	old, err := decode(m.Value)
	if err != nil {
		return nil, err
	}
	switch r.kind {
	case setIfAbsent:
		return nil, nil
	case setIfOwned:
		if equalJSON(old, r.value) || !r.owned(old) {
			return nil, nil
		}
		return setMember(m, old, r.value, path, depth, unit)
	case removeIfEqual:
		if !equalJSON(old, r.value) {
			return nil, nil
		}
		removeMember(obj, i)
		return []Change{{Path: path, Op: "remove", Old: compact(old)}}, nil
	case remove:
		removeMember(obj, i)
		return []Change{{Path: path, Op: "remove", Old: compact(old)}}, nil
	case set:
		if equalJSON(old, r.value) {
			return nil, nil
		}
		return setMember(m, old, r.value, path, depth, unit)
	case union:
		arr, ok := m.Value.Value.(*hujson.Array)
		if !ok {
			return nil, fmt.Errorf("is %s, want an array", compact(old))
		}
		have, _ := old.([]any)
		var changes []Change
		for _, want := range r.value.([]string) {
			if containsJSON(have, want) {
				continue
			}
			appendElement(arr, depth, unit, want)
			have = append(have, want)
			changes = append(changes, Change{Path: path, Op: "append", New: compact(want)})
		}
		return changes, nil
	}
	return nil, fmt.Errorf("unknown rule kind %d", r.kind)
}

func memberIndex(obj *hujson.Object, key string) int {
	for i, m := range obj.Members {
		if lit, ok := m.Name.Value.(hujson.Literal); ok && lit.String() == key {
			return i
		}
	}
	return -1
}

func member(obj *hujson.Object, key string) *hujson.ObjectMember {
	if i := memberIndex(obj, key); i >= 0 {
		return &obj.Members[i]
	}
	return nil
}

// indentUnit guesses the file's indentation from its first member, so
// inserted keys look like the user's; two spaces for an empty object.
func indentUnit(obj *hujson.Object) string {
	if len(obj.Members) > 0 {
		b := obj.Members[0].Name.BeforeExtra
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			if ws := string(b[i+1:]); ws != "" && strings.Trim(ws, " \t") == "" {
				return ws
			}
		}
	}
	return "  "
}

// multiline reports whether obj is laid out one member per line.
func multiline(obj *hujson.Object) bool {
	if bytes.ContainsRune(obj.AfterExtra, '\n') {
		return true
	}
	for _, m := range obj.Members {
		if bytes.ContainsRune(m.Name.BeforeExtra, '\n') {
			return true
		}
	}
	return len(obj.Members) == 0
}

func addMember(obj *hujson.Object, depth int, unit, key string, value any) error {
	v, err := marshalValue(value, depth, unit)
	if err != nil {
		return err
	}
	before := " "
	if multiline(obj) {
		// A comment at the end of the last member's line belongs to that
		// member: it stays in front of the new one's newline.
		trailing, rest := splitTrailing(obj.AfterExtra)
		before = string(trailing) + "\n" + strings.Repeat(unit, depth)
		if !bytes.ContainsRune(rest, '\n') {
			rest = hujson.Extra("\n" + strings.Repeat(unit, depth-1))
		}
		obj.AfterExtra = rest
	}
	obj.Members = append(obj.Members, hujson.ObjectMember{
		Name:  hujson.Value{BeforeExtra: hujson.Extra(before), Value: hujson.String(key)},
		Value: hujson.Value{BeforeExtra: hujson.Extra(" "), Value: v},
	})
	return nil
}

// splitTrailing splits the whitespace and comments after a value into
// what is on the value's own line (a trailing comment) and the rest.
func splitTrailing(b hujson.Extra) (trailing, rest hujson.Extra) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	return append(hujson.Extra(nil), b[:i]...), append(hujson.Extra(nil), b[i:]...)
}

// removeMember deletes obj's i-th member and the comments before it, but
// keeps the trailing comment of the line before, which describes the
// previous member.
func removeMember(obj *hujson.Object, i int) {
	trailing, _ := splitTrailing(obj.Members[i].Name.BeforeExtra)
	obj.Members = append(obj.Members[:i], obj.Members[i+1:]...)
	if i < len(obj.Members) {
		next := &obj.Members[i].Name.BeforeExtra
		*next = append(append(hujson.Extra(nil), trailing...), *next...)
	} else {
		obj.AfterExtra = append(append(hujson.Extra(nil), trailing...), obj.AfterExtra...)
	}
}

// appendElement adds s to arr, spaced like the elements already there.
func appendElement(arr *hujson.Array, depth int, unit, s string) {
	before := hujson.Extra(" ")
	switch n := len(arr.Elements); {
	case n >= 2:
		before = arr.Elements[n-1].BeforeExtra
		// Drop a comment that belongs to the element it preceded.
		if i := bytes.LastIndexByte(before, '\n'); i >= 0 {
			before = hujson.Extra("\n" + string(before[i+1:]))
		}
	case n == 1 && bytes.ContainsRune(arr.Elements[0].BeforeExtra, '\n'):
		before = hujson.Extra("\n" + strings.Repeat(unit, depth+1))
	case n == 0:
		before = nil
	}
	arr.Elements = append(arr.Elements, hujson.Value{BeforeExtra: append(hujson.Extra(nil), before...), Value: hujson.String(s)})
}

// setMember replaces m's value (old, decoded) with v and reports the change.
func setMember(m *hujson.ObjectMember, old, v any, path string, depth int, unit string) ([]Change, error) {
	hv, err := marshalValue(v, depth, unit)
	if err != nil {
		return nil, err
	}
	m.Value.Value = hv
	return []Change{{Path: path, Op: "set", Old: compact(old), New: compact(v)}}, nil
}

// marshalValue renders v as indented JSON for a key at the given depth.
func marshalValue(v any, depth int, unit string) (hujson.ValueTrimmed, error) {
	b, err := marshal(v, strings.Repeat(unit, depth), unit)
	if err != nil {
		return nil, err
	}
	hv, err := hujson.Parse(b)
	if err != nil {
		return nil, err
	}
	return hv.Value, nil
}

// decode returns the standard-JSON meaning of a (possibly commented) value.
func decode(v hujson.Value) (any, error) {
	v = v.Clone()
	v.Standardize()
	var out any
	if err := json.Unmarshal(v.Pack(), &out); err != nil {
		return nil, err
	}
	return out, nil
}

func equalJSON(have, want any) bool {
	var w any
	b, err := json.Marshal(want)
	if err != nil || json.Unmarshal(b, &w) != nil {
		return false
	}
	return reflect.DeepEqual(have, w)
}

func containsJSON(have []any, want string) bool {
	for _, h := range have {
		if s, ok := h.(string); ok && s == want {
			return true
		}
	}
	return false
}

func compact(v any) string {
	b, err := marshal(v, "", "")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// marshal is json.MarshalIndent without HTML escaping: a shell command
// with "&" and ">" stays readable in the file and in init's report.
func marshal(v any, prefix, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// applyBlock makes the elements between BlockBegin and BlockEnd in arr
// exactly want. Without a block yet, it removes the legacy elements and
// appends the block at the end. The array is laid out one element per
// line from then on; the user's elements and comments keep their bytes.
func applyBlock(arr *hujson.Array, depth int, unit, path string, want, legacy []string) []Change {
	b, e := -1, len(arr.Elements)
	for i, el := range arr.Elements {
		if b < 0 && bytes.Contains(el.BeforeExtra, []byte(BlockBegin)) {
			b = i
		} else if b >= 0 && bytes.Contains(el.BeforeExtra, []byte(BlockEnd)) {
			e = i
			break
		}
	}
	var old []string
	var changes []Change
	indent := "\n" + strings.Repeat(unit, depth+1)
	prefix := indent
	if b >= 0 {
		for _, el := range arr.Elements[b:e] {
			s, _ := el.Value.(hujson.Literal)
			old = append(old, s.String())
		}
		if slices.Equal(old, want) {
			return nil
		}
		before := arr.Elements[b].BeforeExtra
		prefix = string(before[:bytes.Index(before, []byte(BlockBegin))])
	} else {
		// No block yet: take init's own elements out of the user's list.
		drop := map[string]bool{}
		for _, s := range append(append([]string(nil), legacy...), want...) {
			drop[s] = true
		}
		kept := arr.Elements[:0]
		// A comment at the end of the line before a dropped element
		// belongs to the element before it: it moves to what follows.
		var pending hujson.Extra
		for _, el := range arr.Elements {
			if lit, ok := el.Value.(hujson.Literal); ok && lit.Kind() == '"' && drop[lit.String()] {
				old = append(old, lit.String())
				trailing, _ := splitTrailing(el.BeforeExtra)
				pending = append(pending, trailing...)
				continue
			}
			el.BeforeExtra = append(append(hujson.Extra(nil), pending...), el.BeforeExtra...)
			pending = nil
			kept = append(kept, el)
		}
		arr.Elements = kept
		b, e = len(kept), len(kept)
		trailing, rest := splitTrailing(arr.AfterExtra)
		prefix = string(pending) + string(trailing) + indent
		if !bytes.ContainsRune(rest, '\n') {
			rest = hujson.Extra("\n" + strings.Repeat(unit, depth))
		}
		arr.AfterExtra = append(hujson.Extra(indent+BlockEnd), rest...)
	}
	els := make([]hujson.Value, 0, len(want))
	for i, s := range want {
		before := indent
		if i == 0 {
			before = prefix + BlockBegin + indent
		}
		els = append(els, hujson.Value{BeforeExtra: hujson.Extra(before), Value: hujson.String(s)})
	}
	tail := append([]hujson.Value(nil), arr.Elements[e:]...)
	arr.Elements = append(append(arr.Elements[:b], els...), tail...)

	have := map[string]bool{}
	for _, s := range old {
		have[s] = true
	}
	wanted := map[string]bool{}
	for _, s := range want {
		wanted[s] = true
		if !have[s] {
			changes = append(changes, Change{Path: path, Op: "append", New: compact(s)})
		}
	}
	for _, s := range old {
		if !wanted[s] {
			changes = append(changes, Change{Path: path, Op: "remove", Old: compact(s)})
		}
	}
	if len(changes) == 0 {
		// Same elements, now inside a block (or reordered).
		changes = append(changes, Change{Path: path, Op: "set", Old: compact(old), New: compact(want)})
	}
	return changes
}
