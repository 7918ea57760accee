#!/bin/bash
# The reference Claude Code devcontainer's firewall, reproduced from its
# documented behaviour (anthropics/claude-code .devcontainer/init-firewall.sh
# and the "Development containers" page of the Claude Code docs) for the
# scorecard's row (b): never the script itself, and with no network fetch.
#
#   - DNS (udp/53) and SSH (tcp/22) out to anywhere, loopback allowed;
#   - an ipset "allowed-domains" (hash:net) filled once, at start, with the
#     published ranges (GitHub's /meta in the original; PUBLISHED_CIDRS
#     here) and the A records of each allowed name, resolved once;
#   - iptables (IPv4 only: the script sets no ip6tables rule) default DROP
#     for INPUT, FORWARD and OUTPUT, established traffic allowed, the set
#     allowed, everything else REJECTed;
#   - no DNS filter: any name resolves, through any server.
# Needs iptables, ipset, dig and awk (the row's image adds dnsutils and gawk).
# Left out, and said in docs/scorecard.md: the original also allows the
# host's /24 (from the default route; an --internal network has none), and
# gives the user sudo for this script alone (devbox images ship no sudo).
#
# usage (as root in the container): ALLOWED_NAMES="a.test b.test" PUBLISHED_CIDRS="10.0.0.0/24" init-firewall-reference.sh
set -euo pipefail
IFS=$'\n\t'

# Docker's embedded DNS (127.0.0.11) lives in nat rules: keep them.
DOCKER_DNS_RULES=$(iptables-save -t nat | grep "127\.0\.0\.11" || true)

iptables -F
iptables -X
iptables -t nat -F
iptables -t nat -X
iptables -t mangle -F
iptables -t mangle -X
ipset destroy allowed-domains 2>/dev/null || true

if [ -n "$DOCKER_DNS_RULES" ]; then
	echo "restoring Docker DNS rules"
	iptables -t nat -N DOCKER_OUTPUT 2>/dev/null || true
	iptables -t nat -N DOCKER_POSTROUTING 2>/dev/null || true
	while read -r rule; do
		IFS=' ' read -r -a args <<<"$rule"
		iptables -t nat "${args[@]}"
	done <<<"$DOCKER_DNS_RULES"
fi

iptables -A OUTPUT -p udp --dport 53 -j ACCEPT
iptables -A INPUT -p udp --sport 53 -j ACCEPT
iptables -A OUTPUT -p tcp --dport 22 -j ACCEPT
iptables -A INPUT -p tcp --sport 22 -m state --state ESTABLISHED -j ACCEPT
iptables -A INPUT -i lo -j ACCEPT
iptables -A OUTPUT -o lo -j ACCEPT

ipset create allowed-domains hash:net
for cidr in ${PUBLISHED_CIDRS:-}; do
	echo "adding published range $cidr"
	ipset add allowed-domains "$cidr" -exist
done
for name in ${ALLOWED_NAMES:-}; do
	ips=$(dig +noall +answer A "$name" | awk '$4 == "A" {print $5}')
	if [ -z "$ips" ]; then
		echo "ERROR: failed to resolve $name" >&2
		exit 1
	fi
	for ip in $ips; do
		echo "adding $ip for $name"
		ipset add allowed-domains "$ip" -exist
	done
done

iptables -P INPUT DROP
iptables -P FORWARD DROP
iptables -P OUTPUT DROP
iptables -A INPUT -m state --state ESTABLISHED,RELATED -j ACCEPT
iptables -A OUTPUT -m state --state ESTABLISHED,RELATED -j ACCEPT
iptables -A OUTPUT -m set --match-set allowed-domains dst -j ACCEPT
iptables -A OUTPUT -j REJECT --reject-with icmp-admin-prohibited
echo "firewall configuration complete"
