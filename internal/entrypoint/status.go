package entrypoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/devbox-dev/devbox/internal/atomicfile"
	"github.com/devbox-dev/devbox/internal/layout"
)

// StatusPath is where the entrypoint records whether the fence is up. It is
// written by root only (the directory is 0755 root), so the agent's user can
// read it but never forge "fenced". `devbox doctor` and the login banner
// read it.
const StatusPath = layout.StatusPath

// State is the fence's state as the entrypoint last recorded it.
type State string

const (
	// Starting is written first on every start, so a crash mid-way is never
	// mistaken for the previous start's success (Docker keeps /run across
	// restarts).
	Starting State = "starting"
	// Fenced means the rules are loaded, the DNS filter answers and verify
	// passed.
	Fenced State = "fenced"
	// Failed means setup failed; the firewall was left denying everything.
	Failed State = "failed"
)

// Status is the content of StatusPath.
type Status struct {
	State State `json:"state"`
	// Reason says why State is Failed, in words the user can act on.
	Reason string `json:"reason,omitempty"`
	// Time is when this status was written.
	Time time.Time `json:"time"`
	// ElapsedMS is how long the entrypoint took from its start to this
	// status: the devbox part of "container start to fenced and verified".
	ElapsedMS float64 `json:"elapsedMs"`
	// Steps are the setup steps in order with their durations.
	Steps []Step `json:"steps,omitempty"`
	// Policy is the policy file the fence was built from.
	Policy string `json:"policy,omitempty"`
	// User is the account commands run as after the fence is up.
	User string `json:"user,omitempty"`
	// StartID identifies the container start the status belongs to (see
	// StartID), so a later step of the same start can tell "fenced now"
	// from "fenced before the last restart".
	StartID string `json:"startId,omitempty"`
}

// StartID identifies this container start: the kernel's boot id and the
// start time of PID 1 in this PID namespace. A container restart gives PID
// 1 a new start time; a host reboot gives a new boot id.
func StartID() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	stat, err := os.ReadFile("/proc/1/stat")
	if err != nil {
		return ""
	}
	// Field 22 is starttime; fields after the ")" that closes comm are
	// space-separated, starting with field 3.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + f[19]
}

// FencedThisStart reports whether the status at path says the fence was
// installed during the container start id. The Dev Containers CLI can run
// the entrypoint twice in one start (the label's "entrypoint", then the
// image's ENTRYPOINT when overrideCommand is false); the second run needs
// only to drop privileges.
func FencedThisStart(path, id string) (Status, bool) {
	if id == "" {
		return Status{}, false
	}
	st, err := ReadStatus(path)
	return st, err == nil && st.State == Fenced && st.StartID == id
}

// Step is one timed setup step.
type Step struct {
	Name      string  `json:"name"`
	ElapsedMS float64 `json:"elapsedMs"`
	Error     string  `json:"error,omitempty"`
}

// ErrNoStatus is returned by ReadStatus when the entrypoint never ran.
var ErrNoStatus = errors.New("no fence status: the devbox entrypoint has not run in this container")

// WriteStatus writes s to path atomically (temporary file then rename), so a
// reader never sees half a status.
func WriteStatus(path string, s Status) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	// MkdirAll keeps an existing directory's mode; a directory the agent
	// could write would let it swap the file, so insist on 0755.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

// ReadStatus reads the status at path. A missing file wraps ErrNoStatus.
func ReadStatus(path string) (Status, error) {
	var s Status
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("%w (%s missing)", ErrNoStatus, path)
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("status %s: %w", path, err)
	}
	return s, nil
}
