// Package firewall is devbox's egress fence for one network namespace: it
// compiles a Config into iptables/ip6tables rulesets in devbox's own chains,
// loads them as one atomic transaction with kernel sets (ipset, through
// netlink) for the allowed addresses, and runs a DNS filter that answers only
// allowlisted names and inserts their addresses into the sets before it
// returns the answer. Blocked packets are reported through NFLOG and written,
// with refused queries, as JSON lines to a log file.
//
// The pieces, in the order an entrypoint running as root uses them:
//
//	cfg := fwpolicy.Config(p)                  // devbox policy → Config, or build one by hand
//	res, err := firewall.Apply(ctx, cfg)       // deny-all, sets, rules; fail closed
//	pid, err := firewall.StartDNS(ctx, cfg, firewall.DaemonOptions{
//		Command: []string{layout.BinaryPath, "firewall", "dns"},
//	})                                         // detached, layout.DNSUID, ambient CAP_NET_ADMIN;
//	                                           // "--config FILE" is appended to Command
//	warnings := firewall.Warm(ctx, cfg)        // resolve exact names through the filter
//	err = firewall.Verify(ctx, cfg, targets)   // prove the fence from inside
//
// RunDNS is the daemon's body (`devbox firewall dns`), ReadStatus reads rules,
// counters, set sizes and the daemon's health, DenyAll is the fail-closed
// state Apply falls back to, and ReadLog / FollowLog read the log.
//
// Every function that touches the kernel needs CAP_NET_ADMIN in the network
// namespace it runs in; the agent's user has none and cannot change any of it.
// Apply and RunDNS must run in a process that is wholly inside the target
// namespace (the container, or `ip netns exec`): they use several threads.
// Rules is pure and works anywhere; on systems other than Linux the
// kernel-facing functions return an error.
package firewall
