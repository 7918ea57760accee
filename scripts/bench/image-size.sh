#!/usr/bin/env bash
# scripts/bench/image-size.sh — builds the default image (the default
# policy: default tools and Claude Code, no extra packages) on the test base
# with the test BuildKit (scripts/services), writes it as an OCI layout, and
# prints the per-layer table (uncompressed and compressed MB), the packages
# the packages step added, and the total against the 600 MB budget
# (exit 1 above it). BUDGET=MB changes the budget. devbox is built as a
# release is (static, -trimpath -ldflags='-s -w'): the image carries the
# devbox that runs `devbox build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
eval "$(scripts/services env)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$work/devbox" ./cmd/devbox
mkdir -p "$work/repo"
cat >"$work/repo/devbox.policy.jsonc" <<POLICY
// The default policy, on the test base (scripts/services) instead of
// docker.io/library/debian (no public registry in tests).
{ "image": { "base": "$DEVBOX_BASE_IMAGE" } }
POLICY
"$work/devbox" lock --policy "$work/repo/devbox.policy.jsonc" --platform linux/"$(go env GOARCH)" >/dev/null
"$work/devbox" build --policy "$work/repo/devbox.policy.jsonc" --frozen --progress quiet --output oci="$work/oci" >/dev/null
go run ./scripts/bench/imagesize -budget "${BUDGET:-600}" "$work/oci"
