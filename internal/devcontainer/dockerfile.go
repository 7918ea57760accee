package devcontainer

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/devbox-dev/devbox/internal/policy"
)

// Dockerfile renders a Dockerfile for the build-from-repo mode, with
// .devcontainer/ as its context: the policy's base image and packages, the
// non-root user, the DNS filter's system user, the devbox binary and the
// policy at their fixed paths, and the devcontainer.metadata label that
// makes the Dev Containers CLI start the fence.
//
// It is the fallback until internal/image exposes its own Dockerfile
// renderer (the same build as `devbox build`); `devbox init` takes either
// through InitOptions.Dockerfile. It does not install Claude Code: the
// pinned, integrity-checked install lives in internal/image.
func Dockerfile(p *policy.Policy) ([]byte, error) {
	label, err := json.Marshal([]map[string]any{FenceProperties(p)})
	if err != nil {
		return nil, err
	}
	// A JSON string is also a valid double-quoted Dockerfile LABEL value.
	quoted, err := json.Marshal(string(label))
	if err != nil {
		return nil, err
	}
	pkgs := append([]string{"ca-certificates", "iptables", "ipset"}, p.Image.Packages...)
	u := p.Image.User
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", p.Image.Base)
	fmt.Fprintf(&b, "RUN apt-get update \\\n && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends %s \\\n && rm -rf /var/lib/apt/lists/*\n", strings.Join(pkgs, " "))
	fmt.Fprintf(&b, "RUN groupadd --system --gid %d %s \\\n && useradd --system --uid %d --gid %d --no-create-home --shell /usr/sbin/nologin %s \\\n", DNSUID, DNSUser, DNSUID, DNSUID, DNSUser)
	fmt.Fprintf(&b, " && groupadd --gid %d %s \\\n && useradd --uid %d --gid %d --create-home --shell /bin/bash %s \\\n", u.GID, u.Name, u.UID, u.GID, u.Name)
	fmt.Fprintf(&b, " && mkdir -p /etc/devbox /var/log/devbox %s/.claude && chown %d:%d %s/.claude\n", HomeDir(p), u.UID, u.GID, HomeDir(p))
	fmt.Fprintf(&b, "COPY .devbox/devbox %s\n", BinaryPath)
	// policy.Load reads HuJSON whatever the file is called, so the policy
	// goes in as written; the entrypoint validates it again at start.
	fmt.Fprintf(&b, "COPY %s %s\n", policy.DefaultFileName, PolicyPath)
	fmt.Fprintf(&b, "LABEL devcontainer.metadata=%s\n", quoted)
	return []byte(b.String()), nil
}
