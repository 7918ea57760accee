# Sourced by the bench scripts that time a devbox built from this checkout
# (POSIX sh): sets here (the checkout) and work (a temporary directory,
# removed on exit), and builds $work/devbox.
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$here" && go build -o "$work/devbox" ./cmd/devbox)
