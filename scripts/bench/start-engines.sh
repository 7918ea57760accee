#!/usr/bin/env bash
# scripts/bench/start-engines.sh [RUNS] — `devcontainer up` (prebuilt image,
# already pulled) → "fenced and verified", on Docker, rootful Podman and
# rootless Podman, against the test services (scripts/services) and a test
# world on an internal network of each engine. Prints the per-engine medians
# and every run as a Markdown table. Run as root (the rootless runs use the
# services' user, devbox-podman).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/e2ebench.sh
e2e_bench StartEngines "${1:-3}" '^(docker|podman [a-z]+) devcontainer up:|^\|'
