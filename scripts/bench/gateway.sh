#!/bin/bash
# Credential gateway benchmarks (issue 11). Prints figures; asserts nothing.
#   1. per-request latency p50/p99 of a streamed Messages API request,
#      through the gateway vs straight to the upstream (both TLS-verified,
#      keep-alive), and what the gateway adds
#   2. time to the first SSE byte when the upstream spaces its events: the
#      gateway must pass the first event on at once (no buffering)
# Loopback only: a fake Messages API over TLS with a test CA.
#
# usage: scripts/bench/gateway.sh [REQUESTS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
exec go run ./scripts/bench/gwbench -n "${1:-2000}"
