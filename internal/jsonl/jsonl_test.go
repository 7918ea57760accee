package jsonl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAppend: one line per value, control characters escaped, nil logs
// drop values.
func TestAppend(t *testing.T) {
	var b bytes.Buffer
	l := &Log[map[string]string]{W: &b}
	l.Append(map[string]string{"path": "/x\r\n{\"forged\":1}\x1b[2K"})
	l.Append(map[string]string{"path": "/y"})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 || strings.ContainsAny(b.String(), "\r\x1b") {
		t.Fatalf("log = %q", b.String())
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil || m["path"] != "/x\r\n{\"forged\":1}\x1b[2K" {
		t.Errorf("line 1 = %q (%v)", lines[0], err)
	}
	var nilLog *Log[int]
	nilLog.Append(1)
	(&Log[int]{}).Append(1)
}
