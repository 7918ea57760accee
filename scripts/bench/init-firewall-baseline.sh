#!/bin/bash
# The reference way to build an allowlist firewall (as the Claude Code
# reference devcontainer's init-firewall.sh does): one `dig` per name, one
# `ipset add` process per address, one `iptables` call per rule. Used only as
# the benchmark baseline for `devbox firewall apply`.
#
# usage: init-firewall-baseline.sh NAMES_FILE CIDRS_FILE DNS_SERVER
set -euo pipefail
names=$1 cidrs=$2 dns=$3

iptables -F
iptables -X
iptables -t nat -F
iptables -t nat -X
ipset destroy allowed-domains 2>/dev/null || true

# DNS and loopback before the restrictions.
iptables -A OUTPUT -p udp --dport 53 -j ACCEPT
iptables -A INPUT -p udp --sport 53 -j ACCEPT
iptables -A INPUT -i lo -j ACCEPT
iptables -A OUTPUT -o lo -j ACCEPT

ipset create allowed-domains hash:net
while read -r cidr; do
	[ -n "$cidr" ] && ipset add allowed-domains "$cidr"
done <"$cidrs"
while read -r name; do
	[ -n "$name" ] || continue
	ips=$(dig +noall +answer +time=1 +tries=1 "@$dns" A "$name" | awk '$4 == "A" {print $5}')
	if [ -z "$ips" ]; then
		echo "ERROR: failed to resolve $name" >&2
		exit 1
	fi
	for ip in $ips; do
		ipset add allowed-domains "$ip" -exist
	done
done <"$names"

iptables -P INPUT DROP
iptables -P FORWARD DROP
iptables -P OUTPUT DROP
iptables -A INPUT -m state --state ESTABLISHED,RELATED -j ACCEPT
iptables -A OUTPUT -m state --state ESTABLISHED,RELATED -j ACCEPT
iptables -A OUTPUT -m set --match-set allowed-domains dst -j ACCEPT
iptables -A OUTPUT -j REJECT --reject-with icmp-admin-prohibited
