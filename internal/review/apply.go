package review

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

// Apply appends the additions to network.allow of the HuJSON policy src,
// each on its own line after a comment with its evidence, and returns the
// new file. Everything else — comments, order, layout — is kept byte for
// byte; a missing "network" or "allow" key is added.
func Apply(src []byte, adds []Addition) ([]byte, error) {
	if len(adds) == 0 {
		return src, nil
	}
	v, err := hujson.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("review: %w", err)
	}
	root, ok := v.Value.(*hujson.Object)
	if !ok {
		return nil, fmt.Errorf("review: the policy is not a JSON object")
	}
	network := member(root, "network")
	if network == nil {
		addMember(root, "network", "{}", memberIndent(root, "  "))
		network = member(root, "network")
	}
	nobj, ok := network.Value.Value.(*hujson.Object)
	if !ok {
		return nil, fmt.Errorf("review: network is not an object")
	}
	keyIndent := indentAfterNewline(network.Name.BeforeExtra)
	allow := member(nobj, "allow")
	if allow == nil {
		addMember(nobj, "allow", "[]", memberIndent(nobj, keyIndent+"  "))
		allow = member(nobj, "allow")
		if !bytes.ContainsRune(nobj.AfterExtra, '\n') {
			nobj.AfterExtra = hujson.Extra("\n" + keyIndent)
		}
	}
	arr, ok := allow.Value.Value.(*hujson.Array)
	if !ok {
		return nil, fmt.Errorf("review: network.allow is not an array")
	}
	allowIndent := indentAfterNewline(allow.Name.BeforeExtra)
	if allowIndent == "" && allow.Name.StartOffset > 0 {
		allowIndent = lineIndent(src, allow.Name.StartOffset)
	}
	elemIndent := allowIndent + "  "
	if n := len(arr.Elements); n > 0 {
		if before := arr.Elements[n-1].BeforeExtra; bytes.ContainsRune(before, '\n') {
			elemIndent = string(before[bytes.LastIndexByte(before, '\n')+1:])
		}
	}
	// What stood before the closing bracket (a comment after the last
	// element) stays where it was, after that element.
	comments := bytes.TrimRight(arr.AfterExtra, " \t\n")
	for i, a := range adds {
		before := "\n" + elemIndent + "// " + oneLine(a.Evidence) + "\n" + elemIndent
		if i == 0 && len(bytes.TrimSpace(comments)) > 0 {
			before = string(comments) + before
		}
		arr.Elements = append(arr.Elements, hujson.Value{BeforeExtra: hujson.Extra(before), Value: hujson.String(a.Destination.String())})
	}
	// A trailing comma after the last element, as the file's style allows
	// in HuJSON, and the closing bracket on its own line.
	arr.Elements[len(arr.Elements)-1].AfterExtra = hujson.Extra("")
	arr.AfterExtra = hujson.Extra("\n" + allowIndent)
	return v.Pack(), nil
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func member(obj *hujson.Object, name string) *hujson.ObjectMember {
	for i := range obj.Members {
		if lit, ok := obj.Members[i].Name.Value.(hujson.Literal); ok && lit.String() == name {
			return &obj.Members[i]
		}
	}
	return nil
}

// addMember appends name: value to obj on its own line, with a trailing
// comma; the closing brace stays where it was.
func addMember(obj *hujson.Object, name, value, indent string) {
	v, _ := hujson.Parse([]byte(value))
	before := hujson.Extra("\n" + indent)
	if n := len(obj.Members); n > 0 {
		// What stood before the closing brace (a comment after the last
		// member) stays after that member.
		if c := bytes.TrimRight(obj.AfterExtra, " \t\n"); len(c) > 0 {
			before = append(append(hujson.Extra(nil), c...), before...)
		}
	}
	obj.Members = append(obj.Members, hujson.ObjectMember{
		Name:  hujson.Value{BeforeExtra: before, Value: hujson.String(name)},
		Value: hujson.Value{BeforeExtra: hujson.Extra(" "), Value: v.Value, AfterExtra: hujson.Extra("")},
	})
	if close := indentAfterNewline(obj.AfterExtra); bytes.ContainsRune(obj.AfterExtra, '\n') {
		obj.AfterExtra = hujson.Extra("\n" + close)
	}
}

// memberIndent is the indentation of obj's members when they sit on lines
// of their own, else def.
func memberIndent(obj *hujson.Object, def string) string {
	for _, m := range obj.Members {
		if bytes.ContainsRune(m.Name.BeforeExtra, '\n') {
			return indentAfterNewline(m.Name.BeforeExtra)
		}
	}
	return def
}

// indentAfterNewline returns what follows the last newline of e ("" when
// it has none).
func indentAfterNewline(e hujson.Extra) string {
	i := bytes.LastIndexByte(e, '\n')
	if i < 0 {
		return ""
	}
	return string(e[i+1:])
}

// lineIndent returns the spaces and tabs that start the line holding off.
func lineIndent(src []byte, off int) string {
	if off < 0 || off > len(src) {
		return ""
	}
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	end := start
	for end < len(src) && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return string(src[start:end])
}

// Diff renders the change from old to new as unified-diff-like lines
// ("+ " added, "- " removed, "  " context around changes), for the
// proposal. Policies are small, so a plain LCS is enough.
func Diff(name string, old, new []byte) string {
	a, b := strings.Split(string(old), "\n"), strings.Split(string(new), "\n")
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var ls []line
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ls = append(ls, line{' ', a[i]})
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			ls = append(ls, line{'+', b[j]})
			j++
		default:
			ls = append(ls, line{'-', a[i]})
			i++
		}
	}
	var out strings.Builder
	changed := false
	for k, l := range ls {
		near := false
		for d := -2; d <= 2; d++ {
			if k+d >= 0 && k+d < len(ls) && ls[k+d].op != ' ' {
				near = true
			}
		}
		if !near {
			continue
		}
		if l.op != ' ' {
			changed = true
		}
		fmt.Fprintf(&out, "  %c %s\n", l.op, l.text)
	}
	if !changed {
		return ""
	}
	return "  --- " + name + "\n  +++ " + name + "\n" + out.String()
}
