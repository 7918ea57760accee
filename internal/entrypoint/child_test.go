package entrypoint

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFenceInChild(t *testing.T) {
	ctx := context.Background()
	var out, errb bytes.Buffer
	// The child gets this process's start time, so its elapsed time covers both.
	if err := FenceInChild(ctx, []string{"sh", "-c", "echo $" + startEnv}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil || !time.Unix(0, ns).Equal(processStart) {
		t.Errorf("child saw %s=%q, want %d", startEnv, out.String(), processStart.UnixNano())
	}
	t.Setenv(startEnv, strconv.FormatInt(ns-int64(time.Second), 10))
	if got := StartTime(); !got.Equal(processStart.Add(-time.Second)) {
		t.Errorf("StartTime in the child = %v, want the parent's %v", got, processStart.Add(-time.Second))
	}

	// Exit 1: the child printed its banner; nothing more is said.
	errb.Reset()
	if err := FenceInChild(ctx, []string{"sh", "-c", "exit 1"}, &out, &errb); err == nil || errb.Len() != 0 {
		t.Errorf("exit 1: err %v, stderr %q", err, errb.String())
	}
	// Anything else has not said why: FenceInChild does.
	for _, argv := range [][]string{{"sh", "-c", "kill -9 $$"}, {"/nonexistent/devbox"}} {
		errb.Reset()
		if err := FenceInChild(ctx, argv, &out, &errb); err == nil || !strings.Contains(errb.String(), "egress stays denied") {
			t.Errorf("%q: err %v, stderr %q", argv, err, errb.String())
		}
	}
}
