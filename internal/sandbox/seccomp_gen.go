//go:build ignore

// seccomp_gen writes seccomp.json: Docker's default seccomp profile (from
// github.com/moby/profiles/seccomp, the version in go.sum) plus the calls
// bubblewrap needs to build a sandbox as a user with no capability.
//
//	go run seccomp_gen.go $(go env GOMODCACHE)/github.com/moby/profiles/seccomp@v0.2.4/default.json
package main

import (
	"encoding/json"
	"log"
	"os"
)

func main() {
	if len(os.Args) != 2 {
		log.Fatal("usage: go run seccomp_gen.go DOCKER_DEFAULT_JSON")
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	var prof map[string]any
	if err := json.Unmarshal(raw, &prof); err != nil {
		log.Fatal(err)
	}
	var kept []any
	for _, r := range prof["syscalls"].([]any) {
		rule := r.(map[string]any)
		names := rule["names"].([]any)
		// The default allows clone only without namespace flags, for
		// containers without CAP_SYS_ADMIN; the unconditional rule below
		// replaces it (two rules for one call confuse some runtimes).
		if len(names) == 1 && names[0] == "clone" && rule["args"] != nil {
			continue
		}
		kept = append(kept, rule)
	}
	kept = append(kept, map[string]any{
		"names":   []string{"clone", "unshare", "setns", "mount", "umount2", "pivot_root"},
		"action":  "SCMP_ACT_ALLOW",
		"comment": "devbox: bubblewrap creates user, mount, PID, IPC, UTS and network namespaces and builds its mount tree as an unprivileged user. These calls only act inside namespaces the caller owns; allowing them exposes the kernel's user-namespace code to the container.",
	})
	prof["syscalls"] = kept
	out, err := json.MarshalIndent(prof, "", "\t")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("seccomp.json", append(out, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
}
