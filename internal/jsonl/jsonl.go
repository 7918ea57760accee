// Package jsonl appends values to a log as JSON lines. Each line is one
// Write, so lines from concurrent writers never interleave, and
// encoding/json escapes every control character, so no field (a name or a
// path an agent chose) can forge a line or reach a terminal raw.
package jsonl

import (
	"encoding/json"
	"io"
	"sync"
)

// Log appends values of T to W; a nil Log or a nil W drops them.
type Log[T any] struct {
	mu sync.Mutex
	W  io.Writer
}

// Append writes v as one JSON line.
func (l *Log[T]) Append(v T) {
	if l == nil || l.W == nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.W.Write(append(b, '\n'))
}
