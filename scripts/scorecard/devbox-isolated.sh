#!/bin/sh
# Scorecard row: devbox init --isolated: the workspace is a clone in a volume, the checkout read-only.
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" devbox-isolated
