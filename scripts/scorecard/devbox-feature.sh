#!/bin/sh
# Scorecard row: the devbox Dev Container Feature added to a plain devcontainer.json.
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" devbox-feature
