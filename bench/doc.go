// Package bench holds skein's workloads and the benchmarks that measure
// them; docs/performance.md describes them and lists the latest figures.
//
// The workloads are Starlark scripts that skein run runs as they are:
//
//   - w1.star (W1): one agent_loop of N model turns, each calling one
//     trivial tool, against the mock provider.
//   - w2.star (W2): N messages appended one by one with
//     agent_session_inject, each committed before the call returns.
//
// The benchmarks (go test -bench . ./bench) run the same files in
// process, over the in-memory store and the SQLite store at each
// durability level (and the Postgres* benchmarks over PostgreSQL, when
// SKEIN_TEST_POSTGRES names a test database; they skip otherwise), and report the ratios the performance targets are
// stated in, measured side by side in one run: the machine they run on
// is usually shared, so a ratio of two runs made back to back, and CPU
// time, mean more than an absolute time.
//
// BenchmarkW1Floor and BenchmarkW2Floor (floor_test.go) measure what no
// code above SQLite can beat: the rows one write of each workload stores,
// replayed straight into a SQLite file with nothing else, in skein's
// tables and in a layout of one row per write, beside the in-memory
// workload; they report the best ratio each layout allows.
package bench
