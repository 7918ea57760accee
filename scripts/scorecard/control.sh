#!/bin/sh
# Scorecard row: a plain container on the world's network, no fence: everything a world can see must get out.
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" control
