#!/bin/bash
# `devcontainer features test -p features` runs this inside a container
# built with the feature, as the remote user.
set -e
source dev-container-features-test-lib
check "devbox installed" test -x /usr/local/bin/devbox
check "policy installed" test -s /etc/devbox/policy.json
check "policy validates" /usr/local/bin/devbox policy validate /etc/devbox/policy.json
check "user cannot change the firewall" bash -c '! iptables -F OUTPUT 2>/dev/null'
# The escape suite is not shipped in the feature: e2e/feature_test.go
# (TestFeature) copies it into a container built with the published
# feature and runs it as the remote user (see docs/feature.md).
reportResults
