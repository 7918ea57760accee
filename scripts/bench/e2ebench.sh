# Sourced by the bench scripts that run a benchmark of ./e2e against the
# test services (scripts/services), from the checkout's root.

# e2e_bench NAME RUNS PATTERN: runs BenchmarkNAME RUNS times and prints the
# lines of its output that match the extended regexp PATTERN, the
# benchmark's own line and the result.
e2e_bench() {
	eval "$(scripts/services env)"
	go test -count=1 -timeout 30m -run '^$' -bench "^Benchmark$1\$" -benchtime "$2x" ./e2e |
		grep -E "$3|^Benchmark$1|^ok|^FAIL|---"
}
