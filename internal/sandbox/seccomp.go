package sandbox

import _ "embed"

// SeccompProfile is Docker's default seccomp profile (moby/profiles v0.2.4)
// plus clone with namespace flags, unshare, setns, mount, umount2 and
// pivot_root, which bubblewrap needs. A container started with
// `--security-opt seccomp=<this file>` can run `devbox run` as its non-root
// user; with Docker's default profile, Probe refuses. seccomp_test.go
// builds it from moby/profiles' typed DefaultProfile (pinned in go.mod) and
// checks it; -update rewrites it.
//
//go:embed seccomp.json
var SeccompProfile []byte
