#!/bin/sh
# Scorecard row: Anthropic's sandbox-runtime (srt, installed by scripts/services) wrapping a shell, as uid 1000, in a netns world.
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" srt
