#!/bin/bash
# Firewall benchmarks (issue 3). Prints figures; asserts nothing about speed.
#   1. apply time, 50 names + 2,000 CIDRs and 10x that, devbox vs the
#      reference script (init-firewall-baseline.sh), fresh namespaces each run
#   2. DNS filter qps and p50/p99 latency vs the upstream queried directly,
#      on loopback
#   3. TCP connection setup with 10 and 10,000 set entries
# Everything runs in network namespaces this script makes (10.77.0.0/24,
# loopback); nothing else is contacted. Needs root, iptables, ipset, dig.
#
# usage: sudo scripts/bench/firewall.sh [RUNS] [SECTION...]   (sections: apply dns conn)
set -euo pipefail
runs=${1:-3}
shift || true
sections=${*:-apply dns conn}
want() { [[ " $sections " == *" $1 "* ]]; }
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/scripts/bench
[ "$(id -u)" = 0 ] || { echo "firewall.sh: run as root" >&2; exit 1; }
. "$here/netns.sh"

tmp=$(bench_tmp fwbench)
ids=()
cleanup() {
	for id in "${ids[@]}"; do world_down "$id"; done
	rm -rf "$tmp"
}
trap cleanup EXIT

bench_build "$root" "$tmp"

ms() { echo $(( ($2 - $1) / 1000000 )); }
now() { date +%s%N; }

# gen N_NAMES N_CIDRS EXTRA_ALLOW_JSON: writes names, cidrs, worldd args and
# the devbox config for that size.
gen() {
	local n=$1 c=$2 d=$tmp/size-$1-$2
	mkdir -p "$d"
	: >"$d/names"; : >"$d/cidrs"; : >"$d/records"
	local allow=""
	for i in $(seq 1 "$n"); do
		echo "n$i.bench.test" >>"$d/names"
		echo "-record=n$i.bench.test A 300 10.77.0.$((2 + i % 3))" >>"$d/records"
		allow+="{\"name\":\"n$i.bench.test\"},"
	done
	for i in $(seq 0 $((c - 1))); do
		local cidr="10.$((128 + i / 256)).$((i % 256)).0/24"
		echo "$cidr" >>"$d/cidrs"
		allow+="{\"prefix\":\"$cidr\"},"
	done
	echo "{\"allow\":[${allow%,}],\"deny\":[],\"stateDir\":\"$d/state\"}" >"$d/config.json"
	echo "$d"
}

start_world() { # ID SIZE_DIR
	local id=$1 d=$2
	ids+=("$id")
	world_up "$id"
	mapfile -t recs <"$d/records"
	ip netns exec "dbw-$id" "$tmp/worldd" -addr 10.77.0.1 -addr 10.77.0.2 "${recs[@]}" >"$tmp/worldd-$id.log" 2>&1 &
	for _ in $(seq 50); do grep -q ready "$tmp/worldd-$id.log" 2>/dev/null && return; sleep 0.1; done
	echo "worldd did not start" >&2; cat "$tmp/worldd-$id.log" >&2; exit 1
}

stop_world() {
	world_down "$1"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

bench_apply() { # N_NAMES N_CIDRS
	local d; d=$(gen "$1" "$2")
	local dv=() bl=() lib=()
	for r in $(seq 1 "$runs"); do
		start_world "a$r$1" "$d"
		local t0 t1
		t0=$(now)
		ip netns exec "dbc-a$r$1" "$tmp/devbox" firewall apply --config "$d/config.json" >"$tmp/apply.out" 2>&1 || { cat "$tmp/apply.out"; exit 1; }
		t1=$(now)
		grep -q warning "$tmp/apply.out" && { echo "apply warned:"; cat "$tmp/apply.out"; }
		# The fence works: a benchmark name connects, a raw address does not.
		ip netns exec "dbc-a$r$1" curl -s -m 2 -o /dev/null "http://n3.bench.test/" || { echo "allowed name did not connect" >&2; exit 1; }
		if ip netns exec "dbc-a$r$1" curl -s -m 2 -o /dev/null "http://10.77.0.1/"; then echo "raw address connected" >&2; exit 1; fi
		dv+=("$(ms "$t0" "$t1")")
		lib+=("$(sed -n 's/.*fence loaded in \([0-9.]*\)ms.*/\1/p' "$tmp/apply.out")")
		ip netns exec "dbc-a$r$1" "$tmp/devbox" firewall deny-all --config "$d/config.json" >/dev/null
		stop_world "a$r$1"

		start_world "b$r$1" "$d"
		t0=$(now)
		ip netns exec "dbc-b$r$1" "$here/init-firewall-baseline.sh" "$d/names" "$d/cidrs" 10.77.0.1 >/dev/null
		t1=$(now)
		bl+=("$(ms "$t0" "$t1")")
		stop_world "b$r$1"
	done
	local mdv mbl
	mdv=$(printf '%s\n' "${dv[@]}" | median)
	mbl=$(printf '%s\n' "${bl[@]}" | median)
	printf 'apply %4d names + %5d CIDRs: devbox %5d ms (runs: %s; firewall.Apply alone: %s ms)  baseline %6d ms (runs: %s)  ratio %sx\n' \
		"$1" "$2" "$mdv" "${dv[*]}" "${lib[*]}" "$mbl" "${bl[*]}" "$(awk -v a="$mbl" -v b="$mdv" 'BEGIN {printf "%.1f", a / (b ? b : 1)}')"
}

if want apply; then
echo "== apply (wall time of the whole command: rules, sets, DNS filter start, names pre-resolved; median of $runs) =="
bench_apply 50 2000
bench_apply 500 20000
fi

if want dns; then
echo "== DNS filter (upstream worldd on loopback 127.0.0.2; 3 s each; c = concurrent clients) =="
ids+=(dns)
world_up dns
ip netns exec dbc-dns ip addr add 127.0.0.2/8 dev lo 2>/dev/null || true
ip netns exec dbc-dns "$tmp/worldd" -addr 127.0.0.2 -tcp "" -udp "" -record "api.test A 300 10.77.0.2" >/dev/null 2>&1 &
sleep 0.5
for c in 1 16; do
	printf 'upstream direct:          '
	ip netns exec dbc-dns "$tmp/fwbench" dns -server 127.0.0.2:53 -name api.test -c "$c"
done
for cache in false true; do
	echo '{"allow":[{"name":"api.test"}],"deny":[],"upstream":["127.0.0.2:53"],"noCache":'"$([ $cache = true ] && echo false || echo true)"',"stateDir":"'"$tmp"'/state-dns"}' >"$tmp/dns.json"
	ip netns exec dbc-dns "$tmp/devbox" firewall apply --config "$tmp/dns.json" >/dev/null
	for c in 1 16; do
		printf 'filter, cache %-5s:      ' "$cache"
		ip netns exec dbc-dns "$tmp/fwbench" dns -server 127.0.0.1:53535 -name api.test -c "$c"
	done
done
ip netns exec dbc-dns "$tmp/devbox" firewall deny-all --config "$tmp/dns.json" >/dev/null
world_down dns
fi

if want conn; then
echo "== TCP connection setup to an allowed address (2,000 connects) =="
for n in 10 10000; do
	d=$(gen 0 $((n - 1)))
	# the world host itself is the n-th entry
	sed -i 's#"allow":\[#"allow":[{"prefix":"10.77.0.2/32"},#' "$d/config.json"
	start_world "c$n" "$d"
	if [ "$n" = 10 ]; then
		printf 'no firewall:       '
		ip netns exec "dbc-c$n" "$tmp/fwbench" conn -addr 10.77.0.2:80 -n 2000
	fi
	ip netns exec "dbc-c$n" "$tmp/devbox" firewall apply --no-dns --config "$d/config.json" >/dev/null
	printf '%5d set entries: ' "$(ip netns exec "dbc-c$n" ipset list devbox-allow4 | grep -c '^10\.')"
	ip netns exec "dbc-c$n" "$tmp/fwbench" conn -addr 10.77.0.2:80 -n 2000
	stop_world "c$n"
done
fi
