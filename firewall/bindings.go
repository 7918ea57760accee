package firewall

import (
	"net/netip"
	"sort"
	"sync"
	"time"
)

// bindings is the DNS filter's record of which names' answers carried
// which address, kept as long as the address stays in the named sets (the
// filter writes set entries with twice the answer's TTL, and so expires a
// binding). The name gate asks for it: a connection passes only to an
// address the filter returned for a name of the same allow entry.
type bindings struct {
	mu sync.Mutex
	m  map[netip.Addr]map[string]time.Time
	n  int
}

// maxBindings bounds the table; past it expired pairs are swept, and if
// that is not enough the table starts again empty. Losing a binding only
// makes the gate refuse until the name is looked up again: closed, not open.
const maxBindings = 1 << 18

// add records that name resolved to a, valid until.
func (b *bindings) add(a netip.Addr, name string, until time.Time) {
	a = a.Unmap()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[netip.Addr]map[string]time.Time{}
	}
	names := b.m[a]
	if names == nil {
		names = map[string]time.Time{}
		b.m[a] = names
	}
	old, ok := names[name]
	if ok && !until.After(old) {
		return
	}
	if !ok {
		if b.n >= maxBindings {
			b.sweepLocked(time.Now())
			if b.n >= maxBindings {
				b.m, b.n = map[netip.Addr]map[string]time.Time{}, 0
				names = map[string]time.Time{}
				b.m[a] = names
			}
		}
		b.n++
	}
	names[name] = until
}

// names returns the names bound to a at now, sorted.
func (b *bindings) names(a netip.Addr, now time.Time) []string {
	a = a.Unmap()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for n, until := range b.m[a] {
		if now.Before(until) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// sweep drops expired pairs.
func (b *bindings) sweep(now time.Time) {
	b.mu.Lock()
	b.sweepLocked(now)
	b.mu.Unlock()
}

func (b *bindings) sweepLocked(now time.Time) {
	for a, names := range b.m {
		for n, until := range names {
			if !now.Before(until) {
				delete(names, n)
				b.n--
			}
		}
		if len(names) == 0 {
			delete(b.m, a)
		}
	}
}
