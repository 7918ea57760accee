package firewall

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// HitsFile is the file under Config.StateDir where the DNS filter keeps how
// often each allow entry answered a query, so `devbox policy review` can
// tell an allow entry never used from one that was.
const HitsFile = "hits.json"

// Hits is the content of HitsFile.
type Hits struct {
	// Since is when the filter that wrote the file started counting.
	Since time.Time `json:"since"`
	// Updated is when the file was last written.
	Updated time.Time `json:"updated"`
	// Entries has one item per allow entry with a name, in Config.Allow
	// order. An allow entry for a prefix is not counted (its packets never
	// pass the filter).
	Entries []EntryHits `json:"entries"`
}

// EntryHits counts the queries one allow entry answered.
type EntryHits struct {
	Entry string    `json:"entry"`
	Hits  int64     `json:"hits"`
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
}

// ReadHits reads the DNS filter's hit counters from stateDir ("" means
// DefaultStateDir). The filter rewrites the file in place, so a read that
// lands mid-write is retried.
func ReadHits(stateDir string) (Hits, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	path := filepath.Join(stateDir, HitsFile)
	var err error
	for range 5 {
		var raw []byte
		raw, err = os.ReadFile(path)
		if err != nil {
			return Hits{}, fmt.Errorf("firewall: %w", err)
		}
		var h Hits
		if err = json.Unmarshal(raw, &h); err == nil {
			return h, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return Hits{}, fmt.Errorf("firewall: %s: %w", path, errors.Join(errors.New("not a hit counter file"), err))
}
