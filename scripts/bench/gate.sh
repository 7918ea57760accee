#!/bin/bash
# Name gate benchmarks (issue 10). Prints figures; asserts nothing about speed.
#   1. connection setup p50/p99, connect → first line of the answer, over
#      TLS (handshake included) and plain HTTP: through the gate vs direct,
#      with the CPU time per connection of the client, server and gate
#   2. 1 GiB downloads over HTTP: through the gate (spliced) vs direct,
#      each transfer's rate and CPU per GiB (client, world server, gate)
#   3. the gate's RSS, idle and with 1,000 idle TLS connections open
#
# Same conditions for both sides: one world, one firewall config, one
# server process serving 10.77.0.2 and 10.77.0.3. The policy allows
# bench.test (→ 10.77.0.2) by name, so connections to it go through the
# gate, and 10.77.0.3/32 as a static entry, so connections to it go
# direct. The client alternates between the two per connection and per
# transfer, so a change in the machine's load lands on both alike. The
# load average is printed at the start and the end (2 cores: above ~1 the
# p99s are mostly other processes' scheduling). CPU time per connection is
# read from /proc between connections; the gate's work for one connection
# can end (its close) within the next, so a little of it shows on the
# direct side.
#
# TIME_WAIT: the bench opens thousands of connections a minute to one
# address:port, and through the gate each leaves two TIME_WAIT sockets
# (the client's, and the gate's upstream one, as the gate closes that
# side first when the client does), from the same address to the same
# destination. Once the ephemeral port range fills up, connect()'s port
# search costs milliseconds and whichever run comes late pays. The client
# namespace (the "container": client and gate) therefore gets
# net.ipv4.tcp_tw_reuse=1, which lets connect() reuse a port whose
# TIME_WAIT is older than 1 s (safe with TCP timestamps; Linux's default 2
# does this for loopback only). It is a per-namespace setting; the host's
# is untouched. Several server ports would spread the same sockets but not
# bound them.
#
# Everything runs in network namespaces this script makes (10.77.0.0/24);
# nothing else is contacted. Needs root, iptables.
#
# usage: sudo scripts/bench/gate.sh [CONNECTIONS] [RUNS] [TRANSFERS]
#   RUNS setup runs of CONNECTIONS per side (2000, 3); TRANSFERS 1 GiB
#   downloads per side (5: single transfers swing by ±30 % here)
set -euo pipefail
n=${1:-2000}
runs=${2:-3}
transfers=${3:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/scripts/bench
[ "$(id -u)" = 0 ] || { echo "gate.sh: run as root" >&2; exit 1; }
. "$here/netns.sh"

tmp=$(bench_tmp gatebench)
id=gb$$
cleanup() {
	world_down "$id"
	rm -rf "$tmp"
}
trap cleanup EXIT

bench_build "$root" "$tmp"

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
world_up "$id"
c=dbc-$id
w=dbw-$id
ip netns exec "$c" sysctl -qw net.ipv4.tcp_tw_reuse=1
ip netns exec "$w" "$tmp/worldd" -addr 10.77.0.1 -tcp 8080 -udp 5000 -record "bench.test A 3600 10.77.0.2" >"$tmp/worldd.log" 2>&1 &
ip netns exec "$w" "$tmp/fwbench" serve -addr 10.77.0.2,10.77.0.3 -name bench.test >"$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do grep -q ready "$tmp/worldd.log" && grep -q ready "$tmp/serve.log" && break; sleep 0.1; done

mkdir -p "$tmp/state"
echo '{"allow":[{"name":"bench.test"},{"prefix":"10.77.0.3/32"}],"gate":true,"upstream":["10.77.0.1:53"],"stateDir":"'"$tmp"'/state"}' >"$tmp/fw.json"
ip netns exec "$c" "$tmp/devbox" firewall apply --config "$tmp/fw.json" >/dev/null
gate=$(awk '{print $1}' "$tmp/state/gate.pid")
fw() { ip netns exec "$c" "$tmp/fwbench" "$@"; }
# Each side's address on port $1, direct first (the ratios are gate/direct).
targets() { echo "direct=10.77.0.3:$1,gate=10.77.0.2:$1"; }

# Proof of the two paths: the gate's passed counter grows for 10.77.0.2
# only (health query: a direct connection to its port).
health() { ip netns exec "$c" bash -c "exec 3<>/dev/tcp/127.0.0.1/53443; cat <&3"; }
fw setup -addr "$(targets 443)" -sni bench.test -n 1 >/dev/null
echo "paths: after one connection to each, gate: $(health)"

echo "== connection setup, $n connections per side one at a time, alternating ($runs runs) =="
for r in $(seq 1 "$runs"); do
	fw setup -addr "$(targets 443)" -sni bench.test -n "$n" -cpu "server=$server,gate=$gate"
	fw setup -addr "$(targets 80)" -n "$n" -cpu "server=$server,gate=$gate"
done

echo "== 1 GiB over HTTP, $transfers transfers per side, alternating =="
fw throughput -addr "$(targets 80)" -bytes $((1 << 30)) -runs "$transfers" -cpu "server=$server,gate=$gate"

echo "== gate RSS =="
rss() { awk '/^VmRSS/ {print $2 " " $3}' "/proc/$gate/status"; }
echo "idle (after the runs above): $(rss)"
fw idle -addr 10.77.0.2:443 -sni bench.test -n 1000 >"$tmp/idle.log" 2>&1 &
idle=$!
for _ in $(seq 300); do grep -q ready "$tmp/idle.log" && break; sleep 0.1; done
grep ready "$tmp/idle.log" >/dev/null || { cat "$tmp/idle.log" >&2; exit 1; }
sleep 1
echo "with 1,000 idle TLS connections: $(rss); threads $(awk '/^Threads/ {print $2}' "/proc/$gate/status"); health $(health)"
kill "$idle"
ip netns exec "$c" "$tmp/devbox" firewall deny-all --config "$tmp/fw.json" >/dev/null
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
