package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/moby/buildkit/client"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/baseline"
	"github.com/devbox-dev/devbox/internal/image"
	"github.com/devbox-dev/devbox/internal/layout"
	"github.com/devbox-dev/devbox/internal/pin"
	"github.com/devbox-dev/devbox/internal/policy"
	"github.com/devbox-dev/devbox/internal/registry"
)

var buildCommand = &cli.Command{
	Name:      "build",
	Usage:     "build the policy's image with BuildKit and push, save or load it",
	ArgsUsage: "[FILE]",
	Description: `Builds the image from the policy and its lock (devbox.lock.json beside the
policy) with a BuildKit daemon: --buildkit-host, else $BUILDKIT_HOST, else
` + image.DefaultBuildkitHost + `. Without --frozen a missing or stale lock is
(re)written first; with --frozen it is an error.

Outputs (at least one):
  --push                push to --tag (repeatable) or the policy's image.tag; prints
                        REPO@sha256:… per reference on stdout
  --output oci=DIR      an OCI layout directory (oci=FILE.tar: an OCI layout tarball)
  --load                load into the Docker engine at $DOCKER_HOST

Progress goes to stderr. The same policy, lock and devbox version give the
same image digest.

BuildKit builds the heavy image (everything but the policy's files) and
devbox keeps it in --cache-dir, keyed by what it is made of; devbox itself
appends the policy layer and labels. A network-only policy edit therefore
skips BuildKit and takes seconds (docs/build.md, "How the image is layered").`,
	Flags: []cli.Flag{
		policyFileFlag,
		platformFlag,
		&cli.BoolFlag{Name: "frozen", Usage: "fail when the lock is missing or stale instead of updating it"},
		&cli.BoolFlag{Name: "push", Usage: "push the image to --tag or the policy's image.tag"},
		&cli.StringSliceFlag{Name: "tag", Aliases: []string{"t"}, Usage: "image `REF` to push or load (repeatable)"},
		&cli.StringFlag{Name: "image-refs", Usage: "also write the pushed REPO@sha256:… references to `FILE`, one a line"},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the image as oci=`DIR` or oci=FILE.tar"},
		&cli.BoolFlag{Name: "load", Usage: "load the image into the Docker engine at $DOCKER_HOST"},
		&cli.StringSliceFlag{Name: "cache-from", Usage: "import build cache: type=registry,ref=`REF`"},
		&cli.StringSliceFlag{Name: "cache-to", Usage: "export build cache: type=registry,ref=`REF`[,mode=max]"},
		&cli.StringFlag{Name: "cache-dir", EnvVars: []string{"DEVBOX_CACHE_DIR"}, Usage: "keep heavy images (all but the policy layer) in `DIR` (default: the user cache directory's devbox/images; \"none\": no cache)"},
		&cli.StringFlag{Name: "progress", Value: "auto", Usage: "progress output: auto, tty, plain, rawjson or quiet"},
		&cli.StringFlag{Name: "buildkit-host", EnvVars: []string{"BUILDKIT_HOST"}, Value: image.DefaultBuildkitHost, Usage: "BuildKit `ADDRESS`: unix://, tcp:// or docker-container://"},
		&cli.StringFlag{Name: "tlscacert", EnvVars: []string{"BUILDKIT_TLS_CACERT"}, Usage: "CA `FILE` for a tcp:// BuildKit daemon"},
		&cli.StringFlag{Name: "tlscert", EnvVars: []string{"BUILDKIT_TLS_CERT"}, Usage: "client certificate `FILE` for a tcp:// BuildKit daemon"},
		&cli.StringFlag{Name: "tlskey", EnvVars: []string{"BUILDKIT_TLS_KEY"}, Usage: "client key `FILE` for a tcp:// BuildKit daemon"},
		&cli.StringFlag{Name: "tlsservername", EnvVars: []string{"BUILDKIT_TLS_SERVERNAME"}, Usage: "server `NAME` expected in the daemon's certificate"},
		&cli.StringSliceFlag{Name: "devbox-binary", Usage: "linux devbox binary to bake in, as [OS/ARCH=]`PATH` (default: this binary, when it is linux on the target arch)"},
		&cli.BoolFlag{Name: "rewrite-timestamp", Value: true, Usage: "clamp every file time in the heavy layers to the lock's SOURCE_DATE_EPOCH (reproducible from an empty cache; costs a pass over the layers each time BuildKit exports a heavy image, once per image with the image cache)"},
		&cli.StringFlag{Name: "source", Value: "https://github.com/devbox-dev/devbox", Usage: "org.opencontainers.image.source `URL`"},
		&cli.StringFlag{Name: "baseline", Usage: "bake the team baseline policy `FILE` at " + layout.BaselinePath + " (digest in a label); repositories using the image may only narrow it, and the policy must lie within it"},
	},
	Action: buildAction,
}

func buildAction(c *cli.Context) error {
	ctx := c.Context
	p, err := loadPolicyFlag(c)
	if err != nil {
		return err
	}
	plats := platformsFlag(c, []string{hostPlatform()})
	lock, err := pin.Ensure(ctx, p, plats, c.Bool("frozen"), pinOptions())
	if err != nil {
		return err
	}

	var base *policy.Policy
	if f := c.String("baseline"); f != "" {
		if base, err = baseline.Load(f); err != nil {
			return fmt.Errorf("--baseline: %w", err)
		}
		ex, err := policy.ExplainFile(p.Path)
		if err != nil {
			return err
		}
		if err := baseline.Check(base, f, ex); err != nil {
			return fmt.Errorf("the policy widens the baseline %s; the image would not fence:\n%w", f, err)
		}
	}

	o := image.BuildOptions{
		DevboxVersion:  version,
		Progress:       c.String("progress"),
		KeepTimestamps: !c.Bool("rewrite-timestamp"),
		ProgressOut:    os.Stderr,
	}
	for _, plat := range plats {
		o.Specs = append(o.Specs, image.Spec{Policy: p, Lock: lock, Platform: plat, Source: c.String("source"), Baseline: base})
	}
	if o.Binaries, err = devboxBinaries(c.StringSlice("devbox-binary"), plats); err != nil {
		return err
	}
	tags := c.StringSlice("tag")
	if len(tags) == 0 && p.Image.Tag != "" {
		tags = []string{p.Image.Tag}
	}
	if c.Bool("push") {
		if len(tags) == 0 {
			return fmt.Errorf("--push: no reference to push to: give --tag or set image.tag in %s", p.Path)
		}
		o.Push = tags
	}
	if out := c.String("output"); out != "" {
		path, ok := strings.CutPrefix(out, "oci=")
		if !ok || path == "" {
			return fmt.Errorf("--output %q: want oci=DIR or oci=FILE.tar", out)
		}
		if strings.HasSuffix(path, ".tar") {
			o.OCITar = path
		} else {
			o.OCIDir = path
		}
	}
	if c.Bool("load") {
		o.LoadName = "devbox:latest"
		if len(tags) > 0 {
			o.LoadName = tags[0]
		}
		host := registry.DockerHost()
		o.LoadFunc = func(ctx context.Context, r io.Reader) (string, error) { return registry.LoadDocker(ctx, host, r) }
	}
	if o.CacheFrom, err = parseCacheEntries("cache-from", c.StringSlice("cache-from")); err != nil {
		return err
	}
	if o.CacheTo, err = parseCacheEntries("cache-to", c.StringSlice("cache-to")); err != nil {
		return err
	}
	if len(o.Push) == 0 && o.OCIDir == "" && o.OCITar == "" && o.LoadFunc == nil {
		return errors.New("no output: give --push, --output oci=DIR or --load")
	}
	switch o.CacheDir = c.String("cache-dir"); o.CacheDir {
	case "none":
		o.CacheDir = ""
	case "":
		if o.CacheDir, err = image.CacheDir(); err != nil {
			return err
		}
	}

	// BuildKit's client libraries log through logrus; the only thing they
	// say in a normal build is that the OCI export directory has no
	// fs-verity, which is noise to a devbox user.
	logrus.SetLevel(logrus.ErrorLevel)
	// BuildKit is dialled only when the heavy image is not in the image
	// cache (or --cache-to asks for its cache): a policy edit needs no
	// daemon.
	o.Connect = func(ctx context.Context) (*client.Client, error) {
		return image.Connect(ctx, c.String("buildkit-host"), image.TLS{
			CACert: c.String("tlscacert"), Cert: c.String("tlscert"), Key: c.String("tlskey"), ServerName: c.String("tlsservername"),
		})
	}
	res, err := image.Build(ctx, nil, o)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	cached, total := 0, 0
	for _, v := range res.Steps() {
		total++
		if v.Cached {
			cached++
		}
	}
	if res.HeavyFromCache {
		warnf("built %s in %.1fs (heavy image %s from %s; only the policy layer is new)", res.Digest, res.Elapsed.Seconds(), strings.Join(res.Heavy, ", "), o.CacheDir)
	} else {
		warnf("built %s in %.1fs (%d of %d devbox steps cached)", res.Digest, res.Elapsed.Seconds(), cached, total)
	}
	if res.Loaded != "" {
		warnf("%s", res.Loaded)
	}
	for _, r := range res.Pushed {
		fmt.Fprintln(c.App.Writer, r)
	}
	if f := c.String("image-refs"); f != "" && len(res.Pushed) > 0 {
		if err := os.WriteFile(f, []byte(strings.Join(res.Pushed, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("--image-refs: %w", err)
		}
	}
	if len(res.Pushed) == 0 {
		fmt.Fprintln(c.App.Writer, res.Digest)
	}
	return nil
}

// devboxBinaries maps each platform to the devbox binary baked in: the
// --devbox-binary values ("PATH" for every platform, or "OS/ARCH=PATH"),
// else this very binary when it runs on linux and the platform's arch.
func devboxBinaries(flags []string, plats []string) (map[string]string, error) {
	m := map[string]string{}
	for _, f := range flags {
		if plat, path, ok := strings.Cut(f, "="); ok {
			m[plat] = path
			continue
		}
		for _, plat := range plats {
			m[plat] = f
		}
	}
	for _, plat := range plats {
		if m[plat] != "" {
			continue
		}
		if plat != runtime.GOOS+"/"+runtime.GOARCH {
			// image.Build names the fix.
			continue
		}
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this devbox binary: %w (give --devbox-binary)", err)
		}
		m[plat] = self
	}
	return m, nil
}
