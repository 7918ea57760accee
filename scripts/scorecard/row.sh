#!/bin/sh
# Measures scorecard rows (docs/scorecard.md): runs e2e's TestScorecard
# for ROWS (comma-separated, or "all") through scripts/test, which starts
# the test services (dockerd, BuildKit, the registry, the Dev Containers CLI,
# srt) or reuses them. Every sandbox runs on an --internal Docker network or
# in a network namespace world: nothing leaves this machine.
#
#   scripts/scorecard/row.sh control            # one row
#   scripts/scorecard/row.sh all                # every row, then the table
#
# Each row's card is written as JSON to $DEVBOX_SCORECARD_OUT (default
# /var/tmp/devbox-scorecard) as ROW.json; table.md there has every card
# found in the directory, one column each. The table and the evidence of
# every escape are also in the test's log. Run as root.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 ROWS (control, reference, srt, devbox-default, devbox-run, devbox-isolated, devbox-feature, all)" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${DEVBOX_SCORECARD_OUT:-/var/tmp/devbox-scorecard}
mkdir -p "$out"
cd "$here"
DEVBOX_SCORECARD_ROWS=$1 DEVBOX_SCORECARD_OUT=$out scripts/test -run 'TestScorecard$' -v ./e2e/
echo "cards in $out:"
ls "$out"
[ ! -f "$out/table.md" ] || cat "$out/table.md"
