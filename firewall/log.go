package firewall

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Event is one line of the blocked-connection log.
type Event struct {
	Time time.Time `json:"time"`
	// Proto is "tcp", "udp", "icmp", "icmpv6", another IP protocol number,
	// or "dns" for a refused query or a dropped answer.
	Proto string `json:"proto"`
	Dst   string `json:"dst,omitempty"`
	Port  uint16 `json:"port,omitempty"`
	// Name is the queried name for DNS events, and for blocked packets the
	// name that recently resolved to Dst, when the filter knows one.
	Name  string `json:"name,omitempty"`
	QType string `json:"qtype,omitempty"`
	// Reason: "not-allowed", "denied" (packets); "dns-not-allowed",
	// "dns-denied", "dns-invalid-name" (refused queries); "answer-loopback",
	// "answer-metadata", "answer-link-local", … (addresses dropped from an
	// allowed name's answer).
	Reason string `json:"reason"`
}

// eventLog appends events as JSON lines.
type eventLog struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *eventLog) write(e Event) {
	if l == nil || l.w == nil {
		return
	}
	raw, _ := json.Marshal(e)
	l.mu.Lock()
	l.w.Write(append(raw, '\n'))
	l.mu.Unlock()
}

// ReadLog returns every event in the log file at path.
func ReadLog(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	defer f.Close()
	var out []Event
	err = scanEvents(f, func(e Event) { out = append(out, e) })
	return out, err
}

func scanEvents(r io.Reader, fn func(Event)) error {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line cut by a crash is not worth failing the reader
		}
		fn(e)
	}
	return sc.Err()
}

// FollowLog calls fn for every event already in the log and then for each
// new one, until ctx is done (like tail -f).
func FollowLog(ctx context.Context, path string, fn func(Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	defer f.Close()
	rd := bufio.NewReader(f)
	var partial []byte
	for {
		line, err := rd.ReadBytes('\n')
		partial = append(partial, line...)
		if err == nil {
			var e Event
			if json.Unmarshal(partial, &e) == nil {
				fn(e)
			}
			partial = partial[:0]
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// String renders an event as one human-readable line.
func (e Event) String() string {
	s := e.Time.Local().Format("15:04:05.000") + " " + e.Reason + " " + e.Proto
	if e.Dst != "" {
		s += " " + e.Dst
		if e.Port != 0 {
			s += fmt.Sprintf(" port %d", e.Port)
		}
	}
	if e.Name != "" {
		s += " " + e.Name
	}
	if e.QType != "" {
		s += " " + e.QType
	}
	return s
}
