package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// plainPolicy marshals a Policy field by field; Normalize wraps it.
type plainPolicy Policy

// Normalize returns the canonical JSON form of p: every key present,
// defaults filled in, presets expanded into network.allow (network.presets
// is kept as information), lists sorted and folded, two-space indented,
// ending in a newline. Parse of the result gives back an equal Policy, and
// normalizing that again gives the same bytes. This is the file baked into
// images at layout.PolicyPath. It fails if p does not validate.
func (p *Policy) Normalize() ([]byte, error) {
	raw, err := json.Marshal((*plainPolicy)(p))
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	q, err := Parse(p.Path, raw)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	// Keep "<", ">" and "&" readable: the file is for people too.
	enc.SetEscapeHTML(false)
	if err := enc.Encode((*plainPolicy)(q)); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return b.Bytes(), nil
}

func asErrors(err error, target **Errors) bool { return errors.As(err, target) }
