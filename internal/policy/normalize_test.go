package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/devbox-dev/devbox/internal/golden"
)

// TestNormalize checks, for every testdata/*.jsonc, the normalized JSON and
// the explanation against golden files, and that normalizing is a fixed
// point: Parse(normalized) equals the policy and normalizes to the same
// bytes.
func TestNormalize(t *testing.T) {
	golden.ForEach(t, "testdata/*.jsonc", func(t *testing.T, file, base string) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := Explain(base+".jsonc", raw)
		if err != nil {
			t.Fatal(err)
		}
		p := ex.Policy
		norm, err := p.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", base+".normalized.json"), norm)

		q, err := Parse(base+".jsonc", norm)
		if err != nil {
			t.Fatalf("Parse(normalized): %v", err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("Parse(normalized) differs:\n%+v\n%+v", p, q)
		}
		again, err := q.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(norm, again) {
			t.Errorf("normalizing twice changed the bytes:\n%s\n%s", norm, again)
		}

		var text bytes.Buffer
		if err := ex.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", base+".explain.txt"), text.Bytes())
		js, err := json.MarshalIndent(ex, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", base+".explain.json"), append(js, '\n'))
	})
}

func TestValidate(t *testing.T) {
	p := mustParse(t, `{}`)
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate(default) = %v", err)
	}
	p.Image.User.UID = 0
	p.Agent.ClaudeCode = "latest"
	err := p.Validate()
	var errs *Errors
	if !errors.As(err, &errs) || len(errs.List) != 2 {
		t.Fatalf("Validate = %v, want two errors", err)
	}
	for _, e := range errs.List {
		if e.Line != 0 || e.Path == "" {
			t.Errorf("error %+v: want a key path and no position", e)
		}
	}
	p = mustParse(t, `{}`)
	p.Network.Allow = append(p.Network.Allow, Destination{Kind: Host, Name: "a\x00.test"})
	if err := p.Validate(); err == nil {
		t.Error("Validate accepted a host name with a NUL byte")
	}
	if _, err := p.Normalize(); err == nil {
		t.Error("Normalize accepted a host name with a NUL byte")
	}
}
