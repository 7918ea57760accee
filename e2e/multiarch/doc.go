// Package multiarch holds the end-to-end test of multi-platform team images:
// `devbox build --platform linux/amd64,linux/arm64 --push` on the test
// registry, and the arm64 image run under QEMU user emulation.
//
// It is a package of its own so that `go test ./...` can run it beside the
// other long E2E packages (e2e, internal/image) instead of after the tests
// of one of them: most of its time is emulated arm64 code on one core. It needs the services
// scripts/test starts (the multi-platform stand-in base among them) and
// skips without DEVBOX_E2E; with it set, anything missing is a failure.
package multiarch
