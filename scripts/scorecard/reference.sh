#!/bin/sh
# Scorecard row: the reference Claude Code devcontainer's firewall, reproduced by init-firewall-reference.sh (address ipset resolved once, iptables default deny, DNS open).
# See row.sh and docs/scorecard.md.
exec "$(dirname "$0")/row.sh" reference
