#!/usr/bin/env bash
# scripts/bench/start-engines.sh [RUNS] — `devcontainer up` (prebuilt image,
# already pulled) → "fenced and verified", on Docker, rootful Podman and
# rootless Podman, against the test services (scripts/services) and a test
# world on an internal network of each engine. Prints the per-engine medians
# and every run as a Markdown table. Run as root (the rootless runs use the
# services' user, devbox-podman).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
eval "$(scripts/services env)"
go test -count=1 -timeout 30m -run '^$' -bench '^BenchmarkStartEngines$' -benchtime "${runs}x" ./e2e |
	grep -E '^(docker|podman [a-z]+) devcontainer up:|^\||^BenchmarkStartEngines|^ok|^FAIL|---'
