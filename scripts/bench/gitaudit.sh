#!/bin/sh
# Prints the time of the host audit (`devbox audit`, what the dev
# container's initializeCommand runs at every start) on a generated
# workspace of ${FILES:-100000} files and ${REPOS:-20} nested repositories
# (each made by git: a commit, a branch, a tag; one with a submodule and
# one with a worktree): the first run (the page cache warm from the
# generation) and the median of ${N:-10} warm runs; then, with bwrap, the
# median of N `devbox run -- true` there (plan, placeholders, sandbox, and
# the run-end audit's scan) beside `devbox run --explain` (the plan alone).
# All local; no network.
# Example (2 shared cores, other work running): 115,074 files, 23 git
# directories: first 564 ms, warm median 458 ms.
set -eu
FILES=${FILES:-100000}
REPOS=${REPOS:-20}
N=${N:-10}
. "$(dirname "$0")/workdir.sh"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null HOME="$work/home" XDG_STATE_HOME="$work/state"
mkdir -p "$HOME"
g() { git -c user.email=b@x.test -c user.name=b -c init.defaultBranch=main -c protocol.file.allow=always -c gc.auto=0 "$@"; }

ws="$work/ws"
mkdir -p "$ws" && cd "$ws" && g init -q .
# FILES files in directories of 100, spread over the root and the repositories.
awk -v per=$((FILES / 100)) -v repos="$REPOS" 'BEGIN {
	for (i = 0; i < per; i++) {
		r = i % (repos + 1)
		d = (r == 0) ? "src/d" i : "vendor/r" r "/d" i
		system("mkdir -p " d)
		for (j = 0; j < 100; j++) { f = d "/f" j ".txt"; print i, j > f; close(f) }
	}
}'
r=1
while [ $r -le "$REPOS" ]; do
	(cd "vendor/r$r" && g init -q . && g add -A && g commit -qm one && g branch topic && g tag v1 && g gc -q)
	r=$((r + 1))
done
g add -A src && g commit -qm root
(cd vendor/r1 && g submodule -q add "$ws/vendor/r2" sub && g commit -qm sub)
(cd vendor/r3 && g worktree add -q ../r3-wt topic)
files=$(find "$ws" -type f | wc -l)
gitdirs=$("$work/devbox" audit --json "$ws" | grep -c '"kind": "gitdir"' || true)

ms() { s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(((e - s) / 1000000)); }
median() {
	n=$1; shift
	k=0
	while [ $k -lt "$n" ]; do ms "$@"; k=$((k + 1)); done | sort -n | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'
}
"$work/devbox" audit --accept "$ws" >/dev/null
first=$(ms "$work/devbox" audit "$ws")
warm=$(median "$N" "$work/devbox" audit "$ws")
"$work/devbox" audit "$ws" >/dev/null || { echo "the audit fails on the accepted tree" >&2; exit 1; }
echo "workspace: $files files, $gitdirs git directories"
echo "devbox audit: first ${first} ms, warm median of $N ${warm} ms"
# devbox run's overhead on the same tree: plan, placeholders, the run-end
# audit (one scan; the first run also records a baseline), against the
# same run with --explain (plans, runs nothing) and `true` alone.
if command -v bwrap >/dev/null; then
	# Outside every path the sandbox can write (/tmp is one), or devbox
	# run refuses it.
	pol=$(mktemp /var/tmp/devbox-bench-policy-XXXXXX)
	trap 'rm -rf "$work" "$pol"' EXIT
	echo '{"sandbox": {"enabled": true}}' >"$pol"
	cd "$ws"
	"$work/devbox" run --policy "$pol" -- true >/dev/null 2>&1 || { echo "devbox run fails here" >&2; exit 1; }
	runms=$(median "$N" "$work/devbox" run --policy "$pol" -- true)
	planms=$(median "$N" "$work/devbox" run --policy "$pol" --explain -- true)
	echo "devbox run -- true: median of $N ${runms} ms; --explain (plan only) ${planms} ms"
fi
