package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/entrypoint"
)

// TestEntrypointFenced: --fenced, the pod's startup probe, passes only on a
// status that says fenced during this container start.
func TestEntrypointFenced(t *testing.T) {
	id := entrypoint.StartID()
	if id == "" {
		t.Skip("no /proc start id here")
	}
	status := filepath.Join(t.TempDir(), "status")
	run := func() (string, error) {
		var out, errOut strings.Builder
		app := newApp()
		app.Writer, app.ErrWriter = &out, &errOut
		app.ExitErrHandler = func(*cli.Context, error) {}
		err := app.Run([]string{"devbox", "entrypoint", "--fenced", "--status", status})
		return out.String() + errOut.String(), err
	}
	if out, err := run(); err == nil || !strings.Contains(out, "not fenced") {
		t.Errorf("no status: %q, %v", out, err)
	}
	for _, tc := range []struct {
		st   entrypoint.Status
		want bool
	}{
		{entrypoint.Status{State: entrypoint.Fenced, StartID: id}, true},
		{entrypoint.Status{State: entrypoint.Fenced, StartID: "other-boot/1"}, false},
		{entrypoint.Status{State: entrypoint.Failed, StartID: id, Reason: "dns: boom"}, false},
		{entrypoint.Status{State: entrypoint.Starting, StartID: id}, false},
	} {
		tc.st.Time = time.Now()
		if err := entrypoint.WriteStatus(status, tc.st); err != nil {
			t.Fatal(err)
		}
		out, err := run()
		if (err == nil) != tc.want {
			t.Errorf("%+v: %q, err %v; want fenced=%v", tc.st, out, err, tc.want)
		}
	}
}
