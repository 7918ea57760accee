#!/usr/bin/env bash
# scripts/bench/start.sh [RUNS] — container start → "fenced and verified",
# from `docker run` and from `devcontainer up` (prebuilt image), against the
# test services (scripts/services) on an --internal Docker network. Prints
# the median and every run, for the whole start and for the devbox
# entrypoint's own part (the figure it prints and records in
# /run/devbox/status). Target: the devbox part under 1 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/e2ebench.sh
e2e_bench Start "${1:-5}" '^(docker run|devcontainer up):'
