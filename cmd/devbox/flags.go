package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/moby/buildkit/client"
	buildctl "github.com/moby/buildkit/cmd/buildctl/build"
	"github.com/urfave/cli/v2"

	"github.com/devbox-dev/devbox/internal/policy"
)

// Flags shared by lock and build.
var (
	policyFileFlag = &cli.StringFlag{Name: "policy", Usage: "policy `FILE` (default: .devcontainer/devbox.policy.jsonc, then devbox.policy.jsonc)"}
	platformFlag   = &cli.StringSliceFlag{Name: "platform", Usage: "target `OS/ARCH` (linux/amd64, linux/arm64); repeat or comma-separate"}
)

// loadPolicyFlag loads the policy named by --policy or by the one optional
// FILE argument (as `devbox policy validate FILE` takes it), or else the one
// findPolicy finds. Extra arguments are an error rather than ignored, so
// `devbox lock a.jsonc b.jsonc` never locks a file the user did not name.
func loadPolicyFlag(c *cli.Context) (*policy.Policy, error) {
	path := c.String(policyFileFlag.Name)
	switch {
	case c.NArg() > 1:
		return nil, fmt.Errorf("want at most one policy FILE, got %d arguments: %q", c.NArg(), c.Args().Slice())
	case c.NArg() == 1 && path != "" && path != c.Args().First():
		return nil, fmt.Errorf("the policy is given twice: --policy %s and argument %s", path, c.Args().First())
	case c.NArg() == 1:
		path = c.Args().First()
	}
	if path == "" {
		var err error
		if path, err = findPolicy(); err != nil {
			return nil, err
		}
	}
	return policy.Load(path)
}

// dirArg is cmd's one optional DIR argument, "." when there is none; cmd
// ("audit") begins the error.
func dirArg(c *cli.Context, cmd string) (string, error) {
	switch c.NArg() {
	case 0:
		return ".", nil
	case 1:
		return c.Args().First(), nil
	}
	return "", fmt.Errorf("%s: at most one DIR argument", cmd)
}

// platformsFlag returns the --platform values (comma-separated or
// repeated), or def when none were given.
func platformsFlag(c *cli.Context, def []string) []string {
	var out []string
	for _, v := range c.StringSlice(platformFlag.Name) {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	if len(out) == 0 {
		return def
	}
	return out
}

// hostPlatform is the platform devbox itself runs on ("linux/amd64").
func hostPlatform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// parseCacheEntries parses --cache-from/--cache-to values in buildx's
// form, "type=registry,ref=host/repo:cache[,mode=max]", with buildctl's own
// parsers (CSV quoting, lower-cased keys, mode=min by default on export),
// then checks what buildctl leaves to the daemon: a known type, and a ref
// for the registry. buildctl's legacy bare-ref form is refused: say type=.
func parseCacheEntries(flag string, vals []string) ([]client.CacheOptionsEntry, error) {
	parse := buildctl.ParseImportCache
	if flag == "cache-to" {
		parse = buildctl.ParseExportCache
	}
	var out []client.CacheOptionsEntry
	for _, v := range vals {
		if !strings.Contains(v, "type=") {
			return nil, fmt.Errorf("--%s %q: missing type= (e.g. type=registry,ref=host/repo:cache)", flag, v)
		}
		es, err := parse([]string{v})
		if err != nil {
			return nil, fmt.Errorf("--%s %q: not key=value pairs: %w", flag, v, err)
		}
		e := es[0]
		switch e.Type {
		case "registry":
			if e.Attrs["ref"] == "" {
				return nil, fmt.Errorf("--%s %q: type=registry needs ref=", flag, v)
			}
		case "local", "inline", "gha", "s3", "azblob":
		case "":
			return nil, fmt.Errorf("--%s %q: missing type= (e.g. type=registry,ref=host/repo:cache)", flag, v)
		default:
			return nil, fmt.Errorf("--%s %q: unknown cache type %q", flag, v, e.Type)
		}
		out = append(out, e)
	}
	return out, nil
}

// warnf prints a note on stderr; stdout is for results only.
func warnf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "devbox: "+format+"\n", a...)
}
