package entrypoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/secrets"
)

// Supervise keeps the entrypoint in the foreground once the fence is up,
// for a container whose main process must stay (the fence container of a
// Kubernetes pod, where the agent runs in a container of its own). Every
// interval it runs check (are the daemons up?); it returns nil when ctx
// ends (the container is stopped) and check's error when a check fails,
// so the caller puts the namespace in deny-all and exits for the kubelet
// to restart the fence.
func Supervise(ctx context.Context, interval time.Duration, check func() error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := check(); err != nil {
				return err
			}
		}
	}
}

// ImportSecrets copies every secret in dir (a mounted Kubernetes Secret:
// one file per key) into store, with the owner and mode the gateway's
// group needs, and returns the names copied. A Secret volume's own
// entries (..data, the timestamped directory) start with a dot and are
// skipped; each key must be a secret name devbox accepts.
func ImportSecrets(dir string, store secrets.Store) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("secrets from %s: %w", dir, err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		v, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return names, fmt.Errorf("secrets from %s: %w", dir, err)
		}
		if err := store.Set(e.Name(), v); err != nil {
			return names, fmt.Errorf("secrets from %s: %w", dir, err)
		}
		names = append(names, e.Name())
	}
	return names, nil
}
