# Sourced by the firewall bench scripts: a client namespace whose only route
# leads to a world namespace (10.77.0.0/24, fd77::/64) where worldd serves
# DNS for .test and TCP/UDP. Nothing else is ever contacted. Also the
# scripts' shared set-up: their work directory and binaries.

# bench_tmp NAME: makes and prints /tmp/devbox-NAME.XXXXXX, 0755 so that
# the daemons' own users can run the binaries in it.
bench_tmp() {
	local d
	d=$(mktemp -d "/tmp/devbox-$1.XXXXXX")
	chmod 755 "$d"
	echo "$d"
}

# bench_build ROOT DIR: builds devbox, worldd and fwbench from the checkout
# ROOT into DIR.
bench_build() {
	echo "building devbox, worldd, fwbench…"
	(cd "$1" && go build -o "$2/devbox" ./cmd/devbox && go build -o "$2/worldd" ./internal/testworld/cmd/worldd && go build -o "$2/fwbench" ./scripts/bench/fwbench)
}

# world_up ID: creates dbc-ID (client) and dbw-ID (world).
world_up() {
	local id=$1 c=dbc-$1 w=dbw-$1
	ip netns add "$c"
	ip netns add "$w"
	ip link add "vc$id" netns "$c" type veth peer name "vw$id" netns "$w"
	ip -n "$c" link set lo up
	ip -n "$w" link set lo up
	ip -n "$c" addr add 10.77.0.100/24 dev "vc$id"
	ip -n "$c" -6 addr add fd77::100/64 dev "vc$id" nodad
	for i in 1 2 3 4; do
		ip -n "$w" addr add 10.77.0.$i/24 dev "vw$id"
		ip -n "$w" -6 addr add fd77::$i/64 dev "vw$id" nodad
	done
	ip -n "$c" link set "vc$id" up
	ip -n "$w" link set "vw$id" up
	ip -n "$c" route add default via 10.77.0.1
	ip -n "$c" -6 route add default via fd77::1
	mkdir -p "/etc/netns/$c"
	echo "nameserver 10.77.0.1" >"/etc/netns/$c/resolv.conf"
}

# world_down ID: kills what runs in the namespaces and removes them.
world_down() {
	local id=$1
	for ns in "dbc-$id" "dbw-$id"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "/etc/netns/dbc-$id"
}
