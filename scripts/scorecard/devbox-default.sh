#!/bin/sh
# Scorecard row: devbox's default dev container (devbox init, devcontainer up), the agent's user.
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" devbox-default
