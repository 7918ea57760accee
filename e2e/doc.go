// Package e2e holds devbox's end-to-end tests: a real Docker engine, the
// real Dev Containers CLI and images built by devbox, on a Docker network
// created with --internal where a "world" container plays the internet
// (the test's own DNS for .test names, TCP, HTTP and UDP servers on IPv4
// and IPv6). Nothing can leave the machine even if the fence fails.
//
// The tests need the services scripts/test starts and skip without
// DEVBOX_E2E; with it set, anything missing is a failure.
package e2e
