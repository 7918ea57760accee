package firewall

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/devbox-dev/devbox/internal/jsonl"
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
	// Reason: "not-allowed", "denied", "udp-gated" (packets);
	// "dns-not-allowed", "dns-denied", "dns-invalid-name" (refused
	// queries); "answer-loopback", "answer-metadata", "answer-link-local",
	// … (addresses dropped from an allowed name's answer); and for
	// connections the name gate refused (Proto "tls", "http" or "tcp"):
	// "not-allowed", "sni-mismatch", "host-mismatch", "no-sni", "ech",
	// "no-name", "ambiguous-tls", "ambiguous-http", "hrr-sni-changed",
	// "too-large", "busy".
	Reason string `json:"reason"`
	// UID is the uid of the process whose connection the gate refused.
	UID *int `json:"uid,omitempty"`
}

// eventLog appends events as JSON lines.
type eventLog = jsonl.Log[Event]

// ReadLog returns every event in the log file at path, the rotated copy
// (path.1, older) first.
func ReadLog(path string) ([]Event, error) {
	var out []Event
	if old, err := os.Open(path + ".1"); err == nil {
		err = scanEvents(old, func(e Event) { out = append(out, e) })
		old.Close()
		if err != nil {
			return nil, fmt.Errorf("firewall: %s.1: %w", path, err)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("firewall: %w", err)
	}
	defer f.Close()
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
// new one, until ctx is done (like tail -F). When the writer rotates the
// file (copies it to path.1 and empties it, see rotatingFile), the lines
// written since the last read are read from path.1 before going on at the
// start of the emptied file. Only a writer that writes more than the bound
// between two polls (200 ms) can make it miss lines (a line read cut in the
// middle is skipped, not misparsed).
func FollowLog(ctx context.Context, path string, fn func(Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	defer f.Close()
	var (
		off     int64 // bytes of path consumed, partial line included
		partial []byte
	)
	emit := func(b []byte) {
		partial = append(partial, b...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				return
			}
			var e Event
			if json.Unmarshal(partial[:i], &e) == nil {
				fn(e)
			}
			partial = partial[i+1:]
		}
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		off += int64(n)
		emit(buf[:n])
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) {
			return err
		}
		if st, serr := os.Stat(path); serr == nil && st.Size() < off {
			// Rotated: the rest of what we had is in path.1.
			if old, oerr := os.Open(path + ".1"); oerr == nil {
				if _, serr := old.Seek(off, io.SeekStart); serr == nil {
					rest, _ := io.ReadAll(old)
					emit(rest)
				}
				old.Close()
			}
			partial = partial[:0]
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return err
			}
			off = 0
			continue
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
	if e.UID != nil {
		s += fmt.Sprintf(" uid %d", *e.UID)
	}
	return s
}

// maxField bounds a logged field that a client chose (a name from an SNI
// or a Host): a DNS name is at most 253 bytes, so a longer one is cut and
// marked. Even with every byte escaped (6 bytes each in JSON) an event's
// line stays a few KiB, far under what the filter reads (maxLogLine).
const maxField = 256

func boundField(s string) string {
	if len(s) <= maxField {
		return s
	}
	return s[:maxField] + "…"
}
