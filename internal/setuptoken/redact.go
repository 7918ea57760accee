// Package setuptoken runs Claude Code's `claude setup-token` sign-in with
// the user's terminal attached and takes the OAuth token it prints out of
// the output: the user sees the sign-in URL and pastes the code back, the
// caller gets the token, and the screen never shows it.
package setuptoken

import (
	"bytes"
	"io"
)

// TokenPrefix starts every OAuth token `claude setup-token` prints.
const TokenPrefix = "sk-ant-oat"

// Shown is what the screen shows where the token was.
const Shown = "[token captured by devbox, not shown]"

// Redactor passes what a program writes through to W, with every token
// (TokenPrefix and the letters, digits, '-' and '_' that follow) replaced
// by Shown and kept for Token. It holds back the bytes that could begin a
// token until the next byte decides, so a token split across writes is
// never shown in part. A token ends at the first other byte: an escape
// sequence or a line break ends it, so the program must print it on one
// line (Run gives it a wide terminal).
type Redactor struct {
	W      io.Writer
	tokens []string
	pend   []byte // a prefix of TokenPrefix, held back
	tok    []byte // the token being read, once TokenPrefix matched
}

func tokenByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_'
}

// Write never fails for its own reasons; an error of W is returned.
func (r *Redactor) Write(p []byte) (int, error) {
	var out bytes.Buffer
	for _, b := range p {
		r.step(&out, b)
	}
	if _, err := r.W.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (r *Redactor) step(out *bytes.Buffer, b byte) {
	if r.tok != nil {
		if tokenByte(b) {
			r.tok = append(r.tok, b)
			return
		}
		r.endToken(out)
	}
	r.pend = append(r.pend, b)
	for len(r.pend) > 0 && !bytes.HasPrefix([]byte(TokenPrefix), r.pend) {
		// Not a prefix (any more): let out the first byte and look again
		// at the rest, which may still begin a token.
		out.Write(r.pend[:1])
		r.pend = r.pend[1:]
	}
	if len(r.pend) == len(TokenPrefix) {
		r.tok, r.pend = append([]byte(nil), r.pend...), nil
	}
}

// minTokenLen keeps a mention of the prefix alone ("sk-ant-oat…" in a
// help text) from counting as a token; it is still not shown.
const minTokenLen = len(TokenPrefix) + 16

func (r *Redactor) endToken(out *bytes.Buffer) {
	if len(r.tok) >= minTokenLen {
		r.tokens = append(r.tokens, string(r.tok))
	}
	r.tok = nil
	out.WriteString(Shown)
}

// Close writes what is held back: an unfinished prefix as it is, a token
// at the very end as Shown.
func (r *Redactor) Close() error {
	var out bytes.Buffer
	if r.tok != nil {
		r.endToken(&out)
	}
	out.Write(r.pend)
	r.pend = nil
	_, err := r.W.Write(out.Bytes())
	return err
}

// Token returns the last token seen ("" when none): a program that
// prints its token twice prints the same one.
func (r *Redactor) Token() string {
	if len(r.tokens) == 0 {
		return ""
	}
	return r.tokens[len(r.tokens)-1]
}
