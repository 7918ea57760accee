package firewall

import (
	"io"
	"os"
	"sync"
)

// Bounds of the files the DNS filter writes: each keeps at most its limit
// plus one rotated copy beside it (PATH.1), so a busy loop of blocked
// connections or a flapping upstream cannot fill the container's disk.
const (
	DefaultLogMaxBytes = 10 << 20 // firewall.jsonl
	errMaxBytes        = 1 << 20  // the daemon's stderr, StateDir/dns.err
)

// rotatingFile appends to f (opened on path) and, before a write would take
// it past max bytes, copies it to path.1 and truncates it. Copy rather
// than rename: the daemon runs as devbox-dns and cannot write the
// root-owned directories its files live in, only the files themselves
// (StartDNS creates both and hands them over). A write never straddles the
// two files, so every line is whole in one of them.
type rotatingFile struct {
	mu   sync.Mutex
	f    *os.File
	path string
	max  int64
	size int64
}

func newRotatingFile(f *os.File, path string, max int64) *rotatingFile {
	r := &rotatingFile{f: f, path: path, max: max}
	if st, err := f.Stat(); err == nil {
		r.size = st.Size()
	}
	return r
}

func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size+int64(len(p)) > r.max {
		// Others may write the same file (the runtime's own messages on
		// stderr): the real size decides.
		if st, err := r.f.Stat(); err == nil {
			r.size = st.Size()
		}
		if r.size > 0 && r.size+int64(len(p)) > r.max {
			r.rotate()
		}
	}
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// rotate keeps the current contents as path.1 (best effort: when the copy
// cannot be written they are dropped, the bound matters more) and empties
// the file.
func (r *rotatingFile) rotate() {
	if src, err := os.Open(r.path); err == nil {
		if dst, err := os.OpenFile(r.path+".1", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
			io.Copy(dst, src)
			dst.Close()
		}
		src.Close()
	}
	r.f.Truncate(0)
	// Without O_APPEND the offset would stay where it was and leave a hole.
	r.f.Seek(0, io.SeekStart)
	r.size = 0
}
