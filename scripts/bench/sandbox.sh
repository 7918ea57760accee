#!/bin/sh
# Prints the overhead of `devbox run` (bubblewrap layer) over running a
# command directly: `true`, and `git status` on a generated 5,000-file repo.
# Median of N runs each (N=${N:-200} for true, ${NGIT:-30} for git status).
# Needs bwrap, git, hyperfine is not required. Runs nothing outside this
# machine: no network at all.
set -eu
N=${N:-200}
NGIT=${NGIT:-30}
. "$(dirname "$0")/workdir.sh"

# median of N runs of "$@", in milliseconds, printed with 2 decimals
median() {
	n=$1; shift
	i=0
	while [ $i -lt "$n" ]; do
		s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N)
		echo $(( (e - s) / 1000 ))
		i=$((i + 1))
	done | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m/1000}'
}

mkdir -p "$work/repo" && cd "$work/repo"
git init -q . && git config user.email bench@example.test && git config user.name bench
i=0
while [ $i -lt 50 ]; do
	mkdir -p "d$i"
	j=0
	while [ $j -lt 100 ]; do echo "file $i $j" > "d$i/f$j.txt"; j=$((j + 1)); done
	i=$((i + 1))
done
git add -A && git commit -qm init
# placeholders are created on the first run; do it before measuring
"$work/devbox" run -- true >/dev/null 2>&1

t_true=$(median "$N" true)
t_dtrue=$(median "$N" "$work/devbox" run -- true)
t_git=$(median "$NGIT" git status)
t_dgit=$(median "$NGIT" "$work/devbox" run -- git status)
echo "devbox run overhead (median ms)"
printf '%-28s %10s %10s %10s\n' workload direct sandboxed overhead
printf '%-28s %10s %10s %10s\n' "true (n=$N)" "$t_true" "$t_dtrue" "$(echo "$t_dtrue - $t_true" | bc)"
printf '%-28s %10s %10s %10s\n' "git status, 5000 files (n=$NGIT)" "$t_git" "$t_dgit" "$(echo "$t_dgit - $t_git" | bc)"
