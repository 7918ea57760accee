#!/bin/sh
# Scorecard row: every row, then the table.
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" all
