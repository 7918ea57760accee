#!/bin/bash
# Name gate benchmarks (issue 10). Prints figures; asserts nothing about speed.
#   1. connection setup p50/p99, connect → first line of the answer, over
#      TLS (handshake included) and plain HTTP: through the gate vs direct
#   2. a 1 GiB download over HTTP: through the gate (spliced) vs direct
#   3. the gate's RSS, idle and with 1,000 idle TLS connections open
# "direct" is the same world with the address allowed as a static entry
# (firewall on, no gate); "gate" allows it by name. Everything runs in
# network namespaces this script makes (10.77.0.0/24); nothing else is
# contacted. Needs root, iptables.
#
# usage: sudo scripts/bench/gate.sh [CONNECTIONS] [RUNS]
set -euo pipefail
n=${1:-2000}
runs=${2:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/scripts/bench
[ "$(id -u)" = 0 ] || { echo "gate.sh: run as root" >&2; exit 1; }
. "$here/netns.sh"

tmp=$(mktemp -d /tmp/devbox-gatebench.XXXXXX)
chmod 755 "$tmp"
id=gb$$
cleanup() {
	world_down "$id"
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "building devbox, worldd, fwbench…"
(cd "$root" && go build -o "$tmp/devbox" ./cmd/devbox && go build -o "$tmp/worldd" ./internal/testworld/cmd/worldd && go build -o "$tmp/fwbench" ./scripts/bench/fwbench)

world_up "$id"
c=dbc-$id
w=dbw-$id
ip netns exec "$w" "$tmp/worldd" -addr 10.77.0.1 -tcp 8080 -udp 5000 -record "bench.test A 300 10.77.0.2" >"$tmp/worldd.log" 2>&1 &
ip netns exec "$w" "$tmp/fwbench" serve -addr 10.77.0.2 -name bench.test >"$tmp/serve.log" 2>&1 &
for _ in $(seq 50); do grep -q ready "$tmp/worldd.log" && grep -q ready "$tmp/serve.log" && break; sleep 0.1; done

mkdir -p "$tmp/state"
common='"upstream":["10.77.0.1:53"],"stateDir":"'"$tmp"'/state"'
echo '{"allow":[{"prefix":"10.77.0.2/32"}],'"$common"'}' >"$tmp/direct.json"
echo '{"allow":[{"name":"bench.test"}],"gate":true,'"$common"'}' >"$tmp/gate.json"
apply() { ip netns exec "$c" "$tmp/devbox" firewall apply --config "$tmp/$1.json" >/dev/null; }
fw() { ip netns exec "$c" "$tmp/fwbench" "$@"; }

echo "== connection setup, $n connections one at a time ($runs runs each, alternating) =="
for r in $(seq 1 "$runs"); do
	for mode in direct gate; do
		apply "$mode"
		printf '%-6s TLS:  ' "$mode"; fw setup -addr 10.77.0.2:443 -sni bench.test -n "$n"
		printf '%-6s HTTP: ' "$mode"; fw setup -addr 10.77.0.2:80 -n "$n"
	done
done

echo "== 1 GiB over HTTP ($runs runs each, alternating) =="
for r in $(seq 1 "$runs"); do
	for mode in direct gate; do
		apply "$mode"
		printf '%-6s ' "$mode"; fw throughput -addr 10.77.0.2:80 -bytes $((1 << 30))
	done
done

echo "== gate RSS =="
apply gate
pid=$(awk '{print $1}' "$tmp/state/gate.pid")
rss() { awk '/^VmRSS/ {print $2 " " $3}' "/proc/$pid/status"; }
echo "idle (after the runs above): $(rss)"
fw idle -addr 10.77.0.2:443 -sni bench.test -n 1000 >"$tmp/idle.log" 2>&1 &
idle=$!
for _ in $(seq 300); do grep -q ready "$tmp/idle.log" && break; sleep 0.1; done
grep ready "$tmp/idle.log" >/dev/null || { cat "$tmp/idle.log" >&2; exit 1; }
sleep 1
h=$(ip netns exec "$c" bash -c "exec 3<>/dev/tcp/127.0.0.1/53443; cat <&3")
echo "with 1,000 idle TLS connections: $(rss); threads $(awk '/^Threads/ {print $2}' "/proc/$pid/status"); health $h"
kill "$idle"
ip netns exec "$c" "$tmp/devbox" firewall deny-all --config "$tmp/gate.json" >/dev/null
