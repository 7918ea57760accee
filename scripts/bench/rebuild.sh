#!/usr/bin/env bash
# scripts/bench/rebuild.sh — the policy-only rebuild figures (issue 15): with
# the test BuildKit and registry (scripts/services), builds a small image
# (claude "none" by default, CLAUDE=2.1.332 for the default one) with
# `devbox build --push` three times and prints, for each, the wall time, the
# image digest and devbox's own line on what it built:
#   first      — an empty devbox image cache (BuildKit's cache may be warm:
#                the heavy image is exported, timestamps rewritten, once)
#   identical  — the same policy again (same digest expected)
#   network    — one more network.allow entry (only the policy layer is new)
#   identical2 — the network change again (its digest again)
# plus the load average before and after. REWRITE=false passes
# --rewrite-timestamp=false; CACHE=none builds without devbox's image cache
# (every build then exports through BuildKit, as before the cache).
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/services env)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/devbox" ./cmd/devbox
claude=${CLAUDE:-none}
# A fixed repository: the tag is in the policy, so another one is another
# image; with this one, two runs (each with an empty image cache) print the
# same digests when the build is reproducible.
repo="$DEVBOX_REGISTRY/devbox/bench-rebuild"
policy() { # $1 = the network.allow list
	mkdir -p "$work/repo"
	cat >"$work/repo/devbox.policy.jsonc" <<POLICY
// scripts/bench/rebuild.sh
{
  "image": { "base": "$DEVBOX_BASE_IMAGE", "tag": "$repo:bench" },
  "agent": { "claudeCode": "$claude" },
  "network": { "allow": $1 },
}
POLICY
}
policy '["api.anthropic.com:443"]'
"$work/devbox" lock --policy "$work/repo/devbox.policy.jsonc" --platform linux/"$(go env GOARCH)" --source-date-epoch 1767225600 >/dev/null
cache=${CACHE:-$work/cache}
build() { # $1 = label
	local t0 t1 out
	t0=$(date +%s.%N)
	if ! out=$("$work/devbox" build --policy "$work/repo/devbox.policy.jsonc" --frozen --push --progress quiet \
		--cache-dir "$cache" --rewrite-timestamp="${REWRITE:-true}" 2>"$work/stderr"); then
		echo "$1: devbox build failed:" >&2
		tail -20 "$work/stderr" >&2
		exit 1
	fi
	t1=$(date +%s.%N)
	printf '%-11s %7.1f s  %s\n            %s\n' "$1" "$(echo "$t1 - $t0" | bc)" "${out##*@}" "$(grep '^devbox: built' "$work/stderr" || tail -1 "$work/stderr")"
}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
build first
build identical
policy '["api.anthropic.com:443", "registry.npmjs.org:443"]'
build network
build identical2
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
