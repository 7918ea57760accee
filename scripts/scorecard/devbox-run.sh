#!/bin/sh
# Scorecard row: devbox with sandbox.enabled: the scorecard runs under devbox run (bubblewrap) in the dev container.
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" devbox-run
