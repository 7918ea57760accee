package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkStart measures container start → "fenced and verified", from
// `docker run` and from `devcontainer up` (prebuilt-image mode), and the
// devbox part of it (the entrypoint's own elapsed time). It reports
// medians; scripts/bench/start.sh runs it and prints the figures.
func BenchmarkStart(b *testing.B) {
	e := setup(b)
	w := startWorld(b, e.d, e.base, e.worldd)
	image := buildImage(b, e, w)
	e.d.Run(b, "pull", "-q", image)

	// docker run: wall time from the docker command to the entrypoint's
	// success line, and the entrypoint's own figure.
	var wall, own []float64
	for i := 0; i < b.N; i++ {
		args := append([]string{"run", "-d", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
			"--security-opt", "no-new-privileges", "--init"}, w.runArgs()...)
		for k, v := range w.containerEnv() {
			args = append(args, "-e", k+"="+v)
		}
		t0 := time.Now()
		id := e.d.Run(b, append(args, image)...)
		ms := waitFencedLine(b, e, id)
		wall = append(wall, float64(time.Since(t0).Microseconds())/1000)
		own = append(own, ms)
		e.d.Command(context.Background(), "rm", "-f", id).Run()
	}
	report(b, "docker run", wall, own)

	// devcontainer up with the prebuilt image: the CLI's whole run, and
	// the entrypoint's own figure.
	repo := sampleRepo(b, e, w, image)
	wall, own = nil, nil
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		out, err := runErr(repo, []string{"DOCKER_HOST=" + e.d.Host}, e.dcli, "up", "--workspace-folder", repo, "--docker-path", e.d.Path, "--remove-existing-container")
		if err != nil {
			b.Fatalf("devcontainer up: %v", err)
		}
		id := containerID(b, out)
		ms := waitFencedLine(b, e, id)
		wall = append(wall, float64(time.Since(t0).Microseconds())/1000)
		own = append(own, ms)
		if i == b.N-1 {
			e.d.Command(context.Background(), "rm", "-f", id).Run()
		}
	}
	report(b, "devcontainer up", wall, own)
}

func containerID(b testing.TB, upOutput string) string {
	lines := strings.Split(strings.TrimSpace(upOutput), "\n")
	last := lines[len(lines)-1]
	const key = `"containerId":"`
	i := strings.Index(last, key)
	if i < 0 {
		b.Fatalf("no containerId in %q", last)
	}
	rest := last[i+len(key):]
	return rest[:strings.IndexByte(rest, '"')]
}

// waitFencedLine follows the container's log until the entrypoint's
// success line and returns the elapsed time it printed.
func waitFencedLine(b testing.TB, e env, id string) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.d.Path, "logs", "-f", id)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+e.d.Host)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer cancel()
	sc := bufio.NewScanner(out)
	var seen []string
	for sc.Scan() {
		line := sc.Text()
		seen = append(seen, line)
		var ms float64
		if _, err := fmt.Sscanf(line, "devbox: fenced and verified in %f ms", &ms); err == nil {
			return ms
		}
		if strings.Contains(line, "THE FENCE IS NOT UP") {
			break
		}
	}
	b.Fatalf("no success line from %s:\n%s", id[:12], strings.Join(seen, "\n"))
	return 0
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(b *testing.B, what string, wall, own []float64) {
	b.Helper()
	unit := strings.ReplaceAll(what, " ", "-")
	b.ReportMetric(median(wall), unit+"-to-fenced-ms")
	b.ReportMetric(median(own), unit+"-entrypoint-ms")
	fmt.Printf("%s: n=%d, start → fenced and verified median %.0f ms (runs %s); devbox entrypoint median %.1f ms (runs %s)\n",
		what, len(wall), median(wall), fmtAll(wall, "%.0f"), median(own), fmtAll(own, "%.1f"))
}

func fmtAll(v []float64, f string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(s, " ")
}

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
	shared := podmanShared(b, "devbox-podman-bench-", &e.worldd)
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
