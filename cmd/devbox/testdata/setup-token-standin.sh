#!/bin/sh
# A stand-in for `claude setup-token`, for tests: it wants a terminal (the
# real one draws with Ink), prints a sign-in URL, reads the code the user
# pastes, and prints an OAuth token ($STANDIN_TOKEN, or a fixed one). With
# any other first argument it fails.
test "$1" = setup-token || { echo "stand-in: want setup-token, got $*" >&2; exit 2; }
test -t 0 && test -t 1 || { echo "stand-in: not a terminal" >&2; exit 3; }
printf 'Browser didn'"'"'t open? Use the url below to sign in:\n\nhttps://claude.test/oauth/authorize?code=true&state=s1\n\nPaste code here if prompted > '
read -r code
if test "$code" != "CODE-42#s1"; then
	echo "OAuth error: invalid code" >&2
	exit 1
fi
printf '\n\033[32m✓ Long-lived authentication token created successfully!\033[39m\n\nYour OAuth token (valid for 1 year):\n\n\033[1m%s\033[22m\n\nStore this token securely. You won'"'"'t be able to see it again.\n' \
	"${STANDIN_TOKEN:-sk-ant-oat01-StandInToken_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789abcdefAA}"
