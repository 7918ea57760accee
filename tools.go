//go:build tools

package devbox

import (
	_ "github.com/coreos/go-iptables/iptables"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/miekg/dns"
	_ "github.com/moby/buildkit/client"
	_ "github.com/moby/buildkit/client/llb"
	_ "github.com/moby/buildkit/util/progress/progressui"
	_ "github.com/tailscale/hujson"
	_ "github.com/urfave/cli/v2"
	_ "github.com/vishvananda/netlink"
)
