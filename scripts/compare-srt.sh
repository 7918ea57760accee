#!/bin/sh
# Runs the per-command sandbox cases of issue 6 (the same as
# internal/sandbox/e2e_test.go) under `devbox run` and under Anthropic's
# sandbox-runtime (srt, npm @anthropic-ai/sandbox-runtime 0.0.83, a peer
# used only for this comparison; devbox does not ship it) and prints the
# table: case -> devbox -> srt.
#
#   eval "$(scripts/services env)"   # sets DEVBOX_SRT
#   scripts/compare-srt.sh
#
# Each case gets a fresh temporary HOME and workspace (never the real
# ones), runs one attack inside the sandbox, and is judged from outside:
# "blocked" when the secret was not printed / the file was not written,
# "LEAKED" or "WRITTEN" otherwise; "+audit" when devbox's run-end audit
# reported the write (and failed the run). Both tools get the same lists: deny
# reading ~/.ssh ~/.aws ~/.netrc **/.env; write the workspace, the home and
# /tmp; no network. Only loopback is used (a listener on 127.0.0.1).
# Needs bwrap, socat (srt), bash, git, python3 (the loopback listener).
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
SRT=${DEVBOX_SRT:-}
[ -n "$SRT" ] && [ -x "$SRT" ] || { echo "compare-srt: set DEVBOX_SRT to the srt binary (eval \"\$(scripts/services env)\")" >&2; exit 2; }
work=$(mktemp -d /var/tmp/devbox-compare-XXXXXX)
listener=
trap 'rm -rf "$work"; [ -z "$listener" ] || kill "$listener" 2>/dev/null || true' EXIT
(cd "$here" && CGO_ENABLED=0 go build -o "$work/devbox" ./cmd/devbox)
SECRET=TOP-SECRET-VALUE

# A loopback listener: "reached" when a sandboxed command can connect to it.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True); sys.stdout.close()
while True:
    c, _ = s.accept(); c.close()
' >"$work/port" &
listener=$!
while [ ! -s "$work/port" ]; do sleep 0.05; done
PORT=$(cat "$work/port")

# fixture DIR: a home with secrets and start-up files, a git workspace
# with .env files, a hook directory and two symlinks planted beforehand.
fixture() {
	d=$1
	H=$d/home W=$d/home/src/ws O=$d/outside
	mkdir -p "$H/.ssh" "$H/.aws" "$W/app" "$O"
	echo "$SECRET" >"$H/.ssh/id_ed25519"
	echo "$SECRET" >"$H/.aws/credentials"
	echo "$SECRET" >"$H/.netrc"
	echo "# bashrc" >"$H/.bashrc"
	echo "$SECRET" >"$W/.env"
	echo "$SECRET" >"$W/app/.env"
	echo outside >"$O/file"
	(cd "$W" && git init -q . && echo "package main" >main.go)
	# Dangerous names below the root, existing at launch: a nested
	# repository (a vendored or cloned one), editor and shell settings.
	mkdir -p "$W/sub/repo/.git/hooks" "$W/sub/.vscode" "$W/a/b/c/d"
	(cd "$W/sub/repo" && git init -q .)
	echo "# rc" >"$W/sub/.bashrc"
	echo "{}" >"$W/sub/.vscode/settings.json"
	echo "{}" >"$W/a/b/c/d/.mcp.json"
	ln -s "$H/.ssh" "$W/keys"
	ln -s .git/hooks "$W/hooks"
	cat >"$d/policy.jsonc" <<EOF
{"sandbox": {"enabled": true, "allowWrite": ["$H"], "denyRead": ["~/.ssh", "~/.aws", "~/.netrc", "**/.env"]}}
EOF
	cat >"$d/srt.json" <<EOF
{
  "network": {"allowedDomains": [], "deniedDomains": []},
  "filesystem": {
    "denyRead": ["$H/.ssh", "$H/.aws", "$H/.netrc", "**/.env"],
    "allowWrite": ["$W", "$H", "/tmp"],
    "denyWrite": []
  }
}
EOF
}

# inbox TOOL DIR SCRIPT: run SCRIPT with sh in TOOL's sandbox, from the
# workspace, with HOME the fixture's; prints its stdout, returns its status.
inbox() {
	tool=$1 d=$2 script=$3
	case $tool in
	devbox)
		(cd "$d/home/src/ws" && HOME=$d/home "$work/devbox" run --policy "$d/policy.jsonc" --workspace "$d/home/src/ws" -- sh -c "$script" 2>>"$d/stderr") ;;
	srt)
		(cd "$d/home/src/ws" && HOME=$d/home "$SRT" --settings "$d/srt.json" -c "$script" 2>>"$d/stderr") ;;
	esac
}

# judge_read TOOL FILE: LEAKED when the secret comes out.
judge_read() {
	d=$work/$1-$n; fixture "$d"
	out=$(inbox "$1" "$d" "cat $2 2>/dev/null; true" || true)
	case $out in *"$SECRET"*) echo LEAKED ;; *) echo blocked ;; esac
}

# judge_write TOOL ATTACK LANDING: WRITTEN when LANDING holds "evil" (or is
# a symlink) after ATTACK. Paths may use $H, $W and $O.
judge_write() {
	d=$work/$1-$n; fixture "$d"
	H=$d/home W=$d/home/src/ws O=$d/outside
	attack=$(printf '%s' "$2" | sed "s|\\\$H|$H|g; s|\\\$W|$W|g; s|\\\$O|$O|g")
	landing=$(printf '%s' "$3" | sed "s|\\\$H|$H|g; s|\\\$W|$W|g; s|\\\$O|$O|g")
	inbox "$1" "$d" "$attack" >/dev/null 2>&1 || true
	if [ -L "$landing" ] || grep -qs evil "$landing" || grep -qs evil "$landing/x" 2>/dev/null; then r=WRITTEN; else r=blocked; fi
	# devbox's run-end audit: the write happened, but the run failed and
	# said where.
	if [ "$1" = devbox ] && grep -qs "AUDIT: .*$landing" "$d/stderr"; then r="$r+audit"; fi
	echo "$r"
}

n=0
row() { # CASE WANT DEVBOX SRT
	printf '%-52s %-14s %-14s %-9s\n' "$1" "$2" "$3" "$4"
}
cmp_read() { n=$((n + 1)); row "read $2" blocked "$(judge_read devbox "$1")" "$(judge_read srt "$1")"; }
cmp_write() { n=$((n + 1)); row "$1" "${4:-blocked}" "$(judge_write devbox "$2" "$3")" "$(judge_write srt "$2" "$3")"; }

row case want devbox srt
row "----" "----" "------" "---"
cmp_read '$HOME/.ssh/id_ed25519' "~/.ssh/id_ed25519 (denied dir)"
cmp_read '$HOME/.aws/credentials' "~/.aws/credentials (denied dir)"
cmp_read '$HOME/.netrc' "~/.netrc (denied file)"
cmp_read '.env' "workspace .env (**/.env)"
cmp_read 'app/.env' "workspace app/.env (**/.env, nested)"
cmp_read 'keys/id_ed25519' "keys/id_ed25519 (link in ws to ~/.ssh)"
cmp_write "write ~/.bashrc (exists)" 'echo evil >> $H/.bashrc' '$H/.bashrc'
cmp_write "create ~/.profile (missing)" 'echo evil > $H/.profile' '$H/.profile'
cmp_write "create ~/.zshrc (missing)" 'echo evil > $H/.zshrc' '$H/.zshrc'
cmp_write "create ~/.gitconfig (missing)" 'echo evil > $H/.gitconfig' '$H/.gitconfig'
cmp_write "write .git/config (exists)" 'echo evil >> $W/.git/config' '$W/.git/config'
cmp_write "create .git/hooks/pre-commit" 'echo evil > $W/.git/hooks/pre-commit' '$W/.git/hooks/pre-commit'
cmp_write "mv .git/hooks away, recreate, add hook" 'mv $W/.git/hooks $W/.git/h.old; mkdir -p $W/.git/hooks && echo evil > $W/.git/hooks/pre-commit' '$W/.git/hooks/pre-commit'
cmp_write "hook through link hooks -> .git/hooks" 'echo evil > $W/hooks/post-checkout' '$W/.git/hooks/post-checkout'
cmp_write "create .gitmodules (missing)" 'echo evil > $W/.gitmodules' '$W/.gitmodules'
cmp_write "create .mcp.json (missing)" 'echo evil > $W/.mcp.json' '$W/.mcp.json'
cmp_write "create .vscode/settings.json (missing)" 'mkdir -p $W/.vscode && echo evil > $W/.vscode/settings.json' '$W/.vscode/settings.json'
cmp_write "create .claude/commands/x.md (missing)" 'mkdir -p $W/.claude/commands && echo evil > $W/.claude/commands/x.md' '$W/.claude/commands/x.md'
cmp_write "create .devcontainer/devcontainer.json" 'mkdir -p $W/.devcontainer && echo evil > $W/.devcontainer/devcontainer.json' '$W/.devcontainer/devcontainer.json'
cmp_write "replace .mcp.json by a symlink" 'rm -f $W/.mcp.json; ln -s /tmp/evil $W/.mcp.json' '$W/.mcp.json'
cmp_write "create .bashrc at the workspace root" 'echo evil > $W/.bashrc' '$W/.bashrc'
cmp_write "write sub/.bashrc (exists, depth 1)" 'echo evil >> $W/sub/.bashrc' '$W/sub/.bashrc'
cmp_write "write sub/.vscode/settings.json (exists)" 'echo evil > $W/sub/.vscode/settings.json' '$W/sub/.vscode/settings.json'
cmp_write "write sub/repo/.git/config (nested repo)" 'echo evil >> $W/sub/repo/.git/config' '$W/sub/repo/.git/config'
cmp_write "create sub/repo/.git/hooks/pre-commit" 'echo evil > $W/sub/repo/.git/hooks/pre-commit' '$W/sub/repo/.git/hooks/pre-commit'
cmp_write "write a/b/c/d/.mcp.json (exists, depth 4)" 'echo evil > $W/a/b/c/d/.mcp.json' '$W/a/b/c/d/.mcp.json'
# Created during the run: no mount can be there; devbox's audit reports it
# and fails the run (+audit), srt says nothing.
cmp_write "git init new/, then add a hook (run-time)" 'git init -q $W/new && echo evil > $W/new/.git/hooks/pre-commit' '$W/new/.git/hooks/pre-commit' "WRITTEN+audit"
cmp_write "mkdir x/y, then x/y/.mcp.json (run-time)" 'mkdir -p $W/x/y && echo evil > $W/x/y/.mcp.json' '$W/x/y/.mcp.json' "WRITTEN+audit"
cmp_write "write outside writable paths" 'echo evil > $O/file' '$O/file'
# The control: if a tool does not run at all, every row above reads
# "blocked"; this row must read WRITTEN for the table to mean anything.
n=$((n + 1)); d_ok=$(judge_write devbox 'echo evil > $W/new.txt' '$W/new.txt'); s_ok=$(judge_write srt 'echo evil > $W/new.txt' '$W/new.txt')
row "write the workspace (control: allowed)" WRITTEN "$d_ok" "$s_ok"

net() { # TOOL [FLAGS]: "reached" when the host's loopback listener answers
	d=$work/$1-net; fixture "$d"
	if [ "$1" = devbox ]; then
		r=$(cd "$d/home/src/ws" && HOME=$d/home "$work/devbox" run --no-network --policy "$d/policy.jsonc" --workspace "$d/home/src/ws" -- bash -c "echo > /dev/tcp/127.0.0.1/$PORT && echo reached" 2>/dev/null || true)
	else
		r=$(inbox srt "$d" "bash -c 'echo > /dev/tcp/127.0.0.1/$PORT' 2>/dev/null && echo reached" || true)
	fi
	case $r in *reached*) echo REACHED ;; *) echo blocked ;; esac
}
row "no network: connect to host loopback" blocked "$(net devbox)" "$(net srt)"
exitcode() {
	d=$work/$1-exit; fixture "$d"
	inbox "$1" "$d" "exit 42" >/dev/null 2>&1 && echo 0 || echo $?
}
row "exit status of 'exit 42'" 42 "$(exitcode devbox)" "$(exitcode srt)"

# Start-up cost: median of 21 runs of `true`.
median() {
	i=0
	while [ $i -lt 21 ]; do
		s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N)
		echo $(((e - s) / 1000)); i=$((i + 1))
	done | sort -n | sed -n 11p | awk '{printf "%.1f ms", $1/1000}'
}
d=$work/timing; fixture "$d"
cd "$d/home/src/ws"
"$work/devbox" run --policy "$d/policy.jsonc" -- true >/dev/null 2>&1 || true
row "run 'true' (median of 21)" "" "$(HOME=$d/home median "$work/devbox" run --policy "$d/policy.jsonc" -- true)" "$(HOME=$d/home median "$SRT" --settings "$d/srt.json" -c true)"
echo "srt: $("$SRT" --version 2>/dev/null); bwrap: $(bwrap --version); user: $(id -u)"
for t in devbox srt; do
	ok=$d_ok; [ $t = devbox ] || ok=$s_ok
	if [ "$ok" != WRITTEN ]; then
		echo "compare-srt: $t did not run the control (its stderr follows): its rows prove nothing" >&2
		cat "$work/$t-"*/stderr 2>/dev/null | sort | uniq -c | sort -rn | head -5 >&2
		status=1
	fi
done
exit "${status:-0}"
