package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkStartEngines measures `devcontainer up` (prebuilt image, the
// image already pulled) to a fenced container on each engine: Docker,
// rootful Podman and rootless Podman, from the CLI's start to the
// entrypoint's "fenced and verified" line. One warm-up `up` per engine
// pulls the image (and, rootless, lets the CLI build its remote-user uid
// image); each timed run replaces the container (--remove-existing-container).
// scripts/bench/start-engines.sh runs it and prints the table.
func BenchmarkStartEngines(b *testing.B) {
	e := setup(b)
	modes := podmanModes(b)
	shared, err := os.MkdirTemp("", "devbox-podman-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o755)
	dst := filepath.Join(shared, "worldd")
	run(b, "", nil, "cp", e.worldd, dst)
	e.worldd = dst
	// Go runs a benchmark with b.N = 1 before the timed round: build once.
	image := sampleImage
	if image == "" {
		image = buildImageTagged(b, e, nil, "bench-"+randHex(6))
	}
	path := strings.Join([]string{filepath.Dir(e.devbox), filepath.Dir(e.dcli), os.Getenv("PATH")}, ":")

	type row struct {
		engine    string
		wall, own []float64
	}
	var rows []row
	measure := func(engine string, pe env, remove func(id string), up func() (string, error)) {
		var r row
		r.engine = engine
		for i := -1; i < b.N; i++ {
			t0 := time.Now()
			out, err := up()
			if err != nil {
				b.Fatalf("%s: devcontainer up: %v", engine, err)
			}
			id := containerID(b, out)
			ms := waitFencedLine(b, pe, id)
			wall := float64(time.Since(t0).Microseconds()) / 1000
			if i >= 0 { // the first run pulled the image: not timed
				r.wall, r.own = append(r.wall, wall), append(r.own, ms)
			}
			b.Cleanup(func() { remove(id) })
		}
		report(b, engine+" devcontainer up", r.wall, r.own)
		rows = append(rows, r)
	}

	// Docker.
	w := startWorld(b, e.d, e.base, e.worldd)
	repo := sampleRepo(b, e, w, image)
	measure("docker", e, func(id string) { e.d.Command(context.Background(), "rm", "-f", id).Run() }, func() (string, error) {
		return runErr(repo, []string{"DOCKER_HOST=" + e.d.Host, "PATH=" + path}, e.dcli, "up", "--workspace-folder", repo,
			"--docker-path", e.d.Path, "--remove-existing-container")
	})

	for _, m := range modes {
		pd := m.cli(b, shared)
		pe := e
		pe.d = pd
		w := startWorldWith(b, pd, e.base, e.worldd, worldOptions{Prefix4: "10.232", Prefix6: "fd7f:db0"})
		repo := podmanRepo(b, e, w, m, image, shared)
		p := strings.Join([]string{filepath.Dir(e.devbox), filepath.Dir(e.dcli), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ":")
		measure("podman "+m.name, pe, func(id string) { removePodmanContainer(pd, id) }, func() (string, error) {
			cmd := m.command(repo, p, e.dcli, "up", "--workspace-folder", repo, "--docker-path", "podman", "--remove-existing-container")
			out, err := cmd.Output()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%v\n%s", err, tail(string(ee.Stderr)))
			}
			return string(out), err
		})
	}

	fmt.Printf("\n| engine | devcontainer up → fenced, median ms | runs (ms) | devbox entrypoint, median ms |\n|---|---:|---|---:|\n")
	for _, r := range rows {
		fmt.Printf("| %s | %.0f | %s | %.1f |\n", r.engine, median(r.wall), fmtAll(r.wall, "%.0f"), median(r.own))
	}
}
