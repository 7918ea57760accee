#!/bin/sh
# devbox Dev Container Feature: installs the devbox binary and a policy so
# the feature's entrypoint (/usr/local/bin/devbox entrypoint) starts the
# egress fence as root on every container start.
#
# Runs as root at image build time from a temporary folder the Dev
# Containers CLI deletes afterwards. Option values arrive as upper-cased
# environment variables, unescaped: each one is validated before any use.
set -eu
# Option values are split on commas below; never expand them as globs.
set -f

die() { echo "devbox feature: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)

# --- options -------------------------------------------------------------
ALLOW=${ALLOW-}
PRESETS=${PRESETS-anthropic,claude-login}
POLICYFILE=${POLICYFILE-}
CLAUDECODE=${CLAUDECODE-none}
SANDBOX=${SANDBOX-false}

# Reject anything but printable ASCII without shell metacharacters. A NUL
# byte cannot reach the environment, but every other control byte can.
check_chars() { # name value
	case $2 in
	*[!A-Za-z0-9.,:/*_\[\]-]*) die "option $1: $(printf '%s' "$2" | od -An -c | tr -s ' ' | head -c 80): only letters, digits and . , : / * _ - [ ] are allowed" ;;
	esac
}

check_chars allow "$ALLOW"
check_chars presets "$PRESETS"
check_chars claudeCode "$CLAUDECODE"

# Host names: the policy's rules (RFC 1123 labels, *.wildcards with two
# labels after *., IPs and CIDRs, optional :port). The devbox binary
# validates them again, byte for byte, when it reads the policy.
oldifs=$IFS; IFS=,
for d in $ALLOW; do
	[ -n "$d" ] || die "option allow: empty entry in \"$ALLOW\""
	case $d in
	\*) die "option allow: \"*\" would allow everything" ;;
	\*.*) rest=${d#\*.}; case $rest in *.*) ;; *) die "option allow: \"$d\": a wildcard needs at least two labels after *." ;; esac ;;
	esac
	[ ${#d} -le 253 ] || die "option allow: \"$d\" is longer than 253 characters"
done
for p in $PRESETS; do
	case $p in
	anthropic|claude-login|github|npm|pypi|go|debian|vscode) ;;
	*) die "option presets: unknown preset \"$p\" (anthropic, claude-login, github, npm, pypi, go, debian, vscode)" ;;
	esac
done
IFS=$oldifs

case $CLAUDECODE in
none) ;;
[0-9]*.[0-9]*.[0-9]*)
	case $CLAUDECODE in *[!0-9.]*|*.*.*.*) die "option claudeCode: \"$CLAUDECODE\" is not an exact X.Y.Z version or none" ;; esac
	die "option claudeCode: $CLAUDECODE is not pinned in this feature package (only none is); use a devbox image (devbox init) for a pinned Claude Code" ;;
*) die "option claudeCode: \"$CLAUDECODE\" is not an exact X.Y.Z version or none (never latest)" ;;
esac

case $SANDBOX in
true|false) ;;
*) die "option sandbox: \"$SANDBOX\" is not true or false" ;;
esac

case $POLICYFILE in
'') ;;
/*|*..*) die "option policyFile: \"$POLICYFILE\" must be a path inside the workspace (relative, no ..)" ;;
*) check_chars policyFile "$POLICYFILE" ;;
esac

# --- the devbox binary, from the package, checked -------------------------
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) die "unsupported architecture $(uname -m) (amd64 and arm64 are)" ;;
esac
bin=devbox-linux-$arch
[ -f "$here/payload/$bin" ] || die "this feature package has no devbox binary for linux/$arch"
(cd "$here/payload" && grep " $bin\$" SHA256SUMS | sha256sum -c --status) || die "payload/$bin does not match payload/SHA256SUMS"
# Copied out of the temporary folder, which the CLI deletes after this step.
install -m 0755 -o root -g root "$here/payload/$bin" /usr/local/bin/devbox

# --- the DNS filter's user, the policy -----------------------------------
if ! getent passwd devbox-dns >/dev/null; then
	groupadd --system --gid 998 devbox-dns 2>/dev/null || addgroup --system --gid 998 devbox-dns
	useradd --system --uid 998 --gid 998 --no-create-home --shell /usr/sbin/nologin devbox-dns 2>/dev/null ||
		adduser --system --uid 998 --ingroup devbox-dns --no-create-home --shell /usr/sbin/nologin devbox-dns
fi
install -d -m 0755 /etc/devbox /var/log/devbox

json_list() { # comma-separated → JSON string list (values validated above)
	out=; oldifs=$IFS; IFS=,
	for x in $1; do out="$out${out:+, }\"$x\""; done
	IFS=$oldifs; printf '[%s]' "$out"
}
umask 022
cat >/etc/devbox/policy.json <<POLICY
{
  "agent": {"claudeCode": "$CLAUDECODE"},
  "network": {
    "presets": $(json_list "$PRESETS"),
    "allow": $(json_list "$ALLOW"),
    "log": {"blocked": true}
  },
  "sandbox": {"enabled": $SANDBOX}
}
POLICY
printf 'DEVBOX_WORKSPACE_POLICY=%s\n' "$POLICYFILE" >/etc/devbox/feature.env

# Fail the build now, not at container start, if devbox rejects the policy.
/usr/local/bin/devbox policy validate /etc/devbox/policy.json >/dev/null ||
	die "the policy built from the options does not validate (see above)"
echo "devbox feature: installed devbox for linux/$arch; the fence starts with the container"
