package firewall

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRotatingFile(t *testing.T) {
	tests := []struct {
		name    string
		max     int64
		lines   int
		appendF bool // opened O_APPEND (the log) or not (a plain stderr)
	}{
		{"no rotation", 1 << 10, 5, true},
		{"append, many rotations", 200, 50, true},
		{"no O_APPEND, many rotations", 200, 50, false},
		{"line longer than the bound", 10, 3, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.log")
			flags := os.O_WRONLY | os.O_CREATE
			if tt.appendF {
				flags |= os.O_APPEND
			}
			f, err := os.OpenFile(path, flags, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := newRotatingFile(f, path, tt.max)
			var all []string
			for i := range tt.lines {
				l := fmt.Sprintf("line %03d\n", i)
				all = append(all, l)
				if _, err := w.Write([]byte(l)); err != nil {
					t.Fatal(err)
				}
			}
			cur, _ := os.ReadFile(path)
			old, _ := os.ReadFile(path + ".1")
			lineLen := int64(len(all[0]))
			if int64(len(cur)) > max(tt.max, lineLen) || int64(len(old)) > max(tt.max, lineLen) {
				t.Errorf("sizes %d and %d exceed the bound %d", len(cur), len(old), tt.max)
			}
			if strings.Contains(string(cur), "\x00") {
				t.Errorf("the file has a hole: %q", cur)
			}
			// The two files are the newest lines, in order, whole.
			got := string(old) + string(cur)
			want := strings.Join(all, "")
			if !strings.HasSuffix(want, got) || len(cur) == 0 {
				t.Errorf("files hold %q, want a suffix of the lines written", got)
			}
			if tt.lines*int(lineLen) > int(tt.max) && len(old) == 0 {
				t.Error("never rotated")
			}
		})
	}
}

// TestLogRotationReadAndFollow: ReadLog returns the rotated copy then the
// current file; FollowLog delivers every event once across a rotation.
func TestLogRotationReadAndFollow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "firewall.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log := &eventLog{W: newRotatingFile(f, path, 1000)}
	write := func(from, to int) {
		for i := from; i < to; i++ {
			log.Append(Event{Time: time.Unix(int64(i), 0).UTC(), Proto: "dns", Name: fmt.Sprintf("n%d.test", i), Reason: "dns-not-allowed"})
		}
	}
	var (
		mu  sync.Mutex
		got []string
	)
	seen := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	write(0, 5) // about 100 bytes each: no rotation yet
	go func() {
		done <- FollowLog(ctx, path, func(e Event) { mu.Lock(); got = append(got, e.Name); mu.Unlock() })
	}()
	waitFor(t, "the first 5 events", func() bool { return seen() == 5 })
	write(5, 12) // one rotation, past the follower's offset
	waitFor(t, "12 events", func() bool { return seen() == 12 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, n := range got {
		if n != fmt.Sprintf("n%d.test", i) {
			t.Fatalf("followed %v, want n0…n11 in order, once each", got)
		}
	}
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Fatalf("no rotation happened: %v", err)
	}
	// One rotation: the copy and the current file together hold them all.
	evs, err := ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
	}
	if strings.Join(names, " ") != strings.Join(got, " ") {
		t.Errorf("ReadLog gave %v, want %v", names, got)
	}
	cur, _ := os.ReadFile(path)
	if n := strings.Count(string(cur), "\n"); n == 0 || n >= 12 {
		t.Errorf("current file has %d lines, want some but not all", n)
	}
}
