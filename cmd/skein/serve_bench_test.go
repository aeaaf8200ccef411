package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/serve/servetest"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// The serve benchmarks run `skein serve` as a child process (so that its
// CPU time is its own, not the load generator's) with one agent that runs
// one agent loop per prompt on the mock provider, and drive it over HTTP:
// each session is followed over SSE, each prompt is POSTed and its turn
// is over when the session's turn_completed event arrives.

// serveBenchAgent is the agent of the serve benchmarks.
const serveBenchAgent = `
def handle(session_id, text):
    agent_loop(text, session_id = session_id, provider = "mock")
`

// retry429 is how long the load generator waits before sending a prompt
// again that got 429 (an impatient client; the server says 5 s).
const retry429 = 20 * time.Millisecond

// benchStore is a store the serve benchmarks run on: newStore returns
// the --store argument of a fresh, empty store.
type benchStore struct {
	name     string
	newStore func(b *testing.B) string
}

// benchStores returns memory, SQLite and (with SKEIN_TEST_POSTGRES)
// PostgreSQL; SKEIN_BENCH_STORES (a comma-separated list of those names)
// keeps only the ones it names (memory is kept for the ratios).
func benchStores(b *testing.B) (stores []benchStore) {
	defer func() {
		if only := os.Getenv("SKEIN_BENCH_STORES"); only != "" {
			keep := strings.Split(only, ",")
			stores = slices.DeleteFunc(stores, func(s benchStore) bool { return s.name != "memory" && !slices.Contains(keep, s.name) })
		}
	}()
	stores = []benchStore{
		{"memory", func(*testing.B) string { return storeMemory }},
		{"sqlite", func(b *testing.B) string { return filepath.Join(b.TempDir(), "sessions.db") }},
	}
	if !pgtest.Available() {
		b.Logf("%s is not set: PostgreSQL not measured", pgtest.Env)
		return stores
	}
	return append(stores, benchStore{"postgres", func(b *testing.B) string {
		dsn := pgtest.DSN(b)
		if _, err := postgres.Migrate(b.Context(), dsn); err != nil {
			b.Fatal(err)
		}
		return dsn
	}})
}

// benchProfileEnv names a directory: when it is set, every skein serve
// child of the serve benchmarks writes a CPU profile of its whole life
// there (<store>-<time>.pprof; the SQLite store is "sessions"), through
// childProfileEnv (see childProfiled).
const benchProfileEnv = "SKEIN_BENCH_SERVE_CPUPROFILE"

// childProfileEnv is the file a child skein process of the tests writes
// its CPU profile to.
const childProfileEnv = "SKEIN_TEST_CHILD_CPUPROFILE"

// childProfiled runs main, the skein command of a child process of the
// tests, under the CPU profiler when childProfileEnv names a file.
func childProfiled(main func() int) int {
	path := os.Getenv(childProfileEnv)
	if path == "" {
		return main()
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpu profile:", err)
		return main()
	}
	code := main()
	pprof.StopCPUProfile()
	f.Close()
	return code
}

// benchServer is a skein serve child process and a client for it.
type benchServer struct {
	b      *testing.B
	cmd    *exec.Cmd
	url    string
	client *http.Client
	stderr bytes.Buffer
	ctx    context.Context
	cancel func()
}

// startBenchServe starts skein serve on store with the benchmark agent
// and room for sessions sessions (active, streamed and in the store's
// memory: the memory store forgets a session its cap evicts); args are more
// flags (none: --max-running at its default), and so are the words of
// SKEIN_BENCH_SERVE_ARGS (for experiments).
func startBenchServe(b *testing.B, store string, sessions int, args ...string) *benchServer {
	b.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		b.Skip("the serve benchmarks read the server's CPU time from /proc")
	}
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "load.star"), []byte(serveBenchAgent), 0o644); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n := strconv.Itoa(sessions)
	args = append(args, strings.Fields(os.Getenv("SKEIN_BENCH_SERVE_ARGS"))...)
	cmd := exec.Command(skeinBinaryB(b), append([]string{"serve", "--store", store, "--addr", addr, "--agent", "load.star",
		"--max-sessions", n, "--max-streams", n, "--max-streams-per-client", n,
		"--session-cap", strconv.Itoa(2 * sessions)}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SKEIN_SERVE_TOKEN=tok", "SKEIN_STORE=")
	if dir := os.Getenv(benchProfileEnv); dir != "" {
		name := strings.SplitN(filepath.Base(store), ".", 2)[0]
		if strings.Contains(store, "://") {
			name = "postgres"
		}
		cmd.Env = append(cmd.Env, childProfileEnv+"="+filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, time.Now().UnixNano())))
	}
	s := &benchServer{b: b, cmd: cmd, url: "http://" + addr,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * sessions, MaxIdleConns: 4 * sessions}}}
	cmd.Stdout, cmd.Stderr = io.Discard, &s.stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	b.Cleanup(s.stop)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := s.client.Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			return s
		}
		if time.Now().After(deadline) {
			b.Fatalf("skein serve did not start: %s", s.stderr.String())
		}
	}
}

// skeinBinaryB is skeinBinary for a benchmark.
func skeinBinaryB(b *testing.B) string {
	path, err := exec.LookPath("skein")
	if err != nil {
		b.Fatalf("skein is not in PATH: %v", err)
	}
	return path
}

// stop ends the server (SIGTERM, as an operator would) and its streams.
func (s *benchServer) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cancel()
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// cpu returns the server process's user plus system CPU time.
func (s *benchServer) cpu() time.Duration {
	t, _, err := procCPU(strconv.Itoa(s.cmd.Process.Pid))
	if err != nil {
		s.b.Fatal(err)
	}
	return t
}

// procCPU returns the user plus system CPU time and the command name of
// process pid (or "self"), from /proc.
func procCPU(pid string) (time.Duration, string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, "", err
	}
	// Fields after the command name, which is in parentheses: state is
	// field 3, utime 14, stime 15 (in clock ticks of 1/100 s on Linux).
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[end+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond, string(data[open+1 : end]), nil
}

// postgresCPU returns the CPU time of this machine's PostgreSQL server
// processes (named postgres) that are running now.
func postgresCPU() time.Duration {
	dir, _ := os.ReadDir("/proc")
	var sum time.Duration
	for _, e := range dir {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if t, name, err := procCPU(e.Name()); err == nil && name == "postgres" {
			sum += t
		}
	}
	return sum
}

// do sends a request and returns its status and decoded JSON body.
func (s *benchServer) do(method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("Authorization", "Bearer tok")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var m map[string]any
	json.Unmarshal(data, &m)
	return resp.StatusCode, m, nil
}

// benchSession is a session of the benchmark agent followed over SSE:
// kinds gets "assistant" for each assistant message and "done" for each
// turn_completed event.
type benchSession struct {
	id    string
	kinds chan string
}

// newSession creates a session and opens its event stream.
func (s *benchServer) newSession() (*benchSession, error) {
	st, m, err := s.do("POST", "/api/sessions", map[string]any{})
	if err != nil {
		return nil, err
	}
	if st != http.StatusCreated {
		return nil, fmt.Errorf("create: %d %v", st, m)
	}
	bs := &benchSession{id: m["id"].(string), kinds: make(chan string, 64)}
	req, _ := http.NewRequestWithContext(s.ctx, "GET", s.url+"/api/sessions/"+bs.id+"/events", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("events: %d", resp.StatusCode)
	}
	ready := make(chan struct{})
	go func() {
		defer resp.Body.Close()
		err := servetest.ScanEvents(resp.Body, ready, func(e servetest.Event) {
			switch {
			case e.Type == "message" && e.Role == "assistant":
				bs.kinds <- "assistant"
			case e.Type == "session:turn_completed":
				bs.kinds <- "done"
			}
		})
		if err != nil {
			s.b.Errorf("session %s: %v", bs.id, err)
		}
	}()
	select {
	case <-ready:
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("the stream of %s did not start", bs.id)
	}
	return bs, nil
}

// newSessions creates n sessions at once, each followed over SSE.
func (s *benchServer) newSessions(n int) []*benchSession {
	out := make([]*benchSession, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			bs, err := s.newSession()
			if err != nil {
				s.b.Error(err)
				return
			}
			out[i] = bs
		})
	}
	wg.Wait()
	if s.b.Failed() {
		s.b.FailNow()
	}
	return out
}

// turnLoad is what running prompts on sessions measured.
type turnLoad struct {
	turns     int
	wall      time.Duration
	cpu       time.Duration   // the server's
	client    time.Duration   // the load generator's (this process)
	database  time.Duration   // the PostgreSQL server processes' on this machine
	latencies []time.Duration // a prompt's first POST to its reply over SSE
	refused   int64           // 429 answers
}

func (l turnLoad) cpuPerTurn() float64  { return float64(l.cpu.Microseconds()) / float64(l.turns) }
func (l turnLoad) turnsPerSec() float64 { return float64(l.turns) / l.wall.Seconds() }

// quantile returns the q quantile of the latencies in ms.
func (l turnLoad) quantile(q float64) float64 {
	slices.Sort(l.latencies)
	return float64(l.latencies[int(q*float64(len(l.latencies)-1))].Microseconds()) / 1000
}

// runTurns sends prompts prompts to every session at once (each waits
// for its turn to end before the next), retrying a prompt refused with
// 429 after retry429.
func (s *benchServer) runTurns(list []*benchSession, prompts int) turnLoad {
	var mu sync.Mutex
	var l turnLoad
	var refused atomic.Int64
	var wg sync.WaitGroup
	cpu0, start := s.cpu(), time.Now()
	client0, _, _ := procCPU("self")
	db0 := postgresCPU()
	for i, bs := range list {
		wg.Go(func() {
			for p := range prompts {
				begin := time.Now()
				for {
					st, m, err := s.do("POST", "/api/sessions/"+bs.id+"/prompt", map[string]any{"text": fmt.Sprintf("s%d p%d", i, p)})
					if err != nil {
						s.b.Error(err)
						return
					}
					if st == http.StatusAccepted {
						break
					}
					if st != http.StatusTooManyRequests {
						s.b.Errorf("prompt: %d %v", st, m)
						return
					}
					refused.Add(1)
					time.Sleep(retry429)
				}
				for _, want := range []string{"assistant", "done"} {
					select {
					case k := <-bs.kinds:
						if k != want {
							s.b.Errorf("session %s: %s, want %s", bs.id, k, want)
							return
						}
					case <-time.After(2 * time.Minute):
						s.b.Errorf("session %s: no %s in 2 minutes", bs.id, want)
						return
					}
					if want == "assistant" {
						mu.Lock()
						l.latencies = append(l.latencies, time.Since(begin))
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	l.wall, l.cpu = time.Since(start), s.cpu()-cpu0
	client1, _, _ := procCPU("self")
	l.client, l.database = client1-client0, postgresCPU()-db0
	l.turns, l.refused = len(list)*prompts, refused.Load()
	if s.b.Failed() {
		s.b.FailNow()
	}
	if len(l.latencies) != l.turns {
		s.b.Fatalf("%d replies for %d prompts", len(l.latencies), l.turns)
	}
	return l
}

// medianOf returns the median of xs.
func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkServeTurnCPU measures the CPU time of the skein serve process
// per served turn on the memory store, SQLite and PostgreSQL (with
// SKEIN_TEST_POSTGRES) side by side: each round starts a server on each
// store in turn (the order rotates from round to round), creates 8
// sessions, warms each up with one prompt, and then sends 50 prompts to
// each session (8 turns at once, under the default --max-running).
// Reported, medians over the rounds: CPU µs per turn and turns per second
// of each store, and the ratios sqlite/memory and postgres/memory of the
// CPU per turn, each the median of the rounds' ratios. The server's CPU
// is read from /proc in clock ticks (10 ms); a round's memory run takes
// several hundred ms of it. Run it with -benchtime 5x (five rounds).
func BenchmarkServeTurnCPU(b *testing.B) {
	const sessionsN, prompts = 8, 50
	stores := benchStores(b)
	cpu := make([][]float64, len(stores))
	rate := make([][]float64, len(stores))
	ratio := make([][]float64, len(stores))
	round := 0
	for b.Loop() {
		per := make([]float64, len(stores))
		for j := range stores {
			k := (j + round) % len(stores)
			srv := startBenchServe(b, stores[k].newStore(b), sessionsN)
			list := srv.newSessions(sessionsN)
			srv.runTurns(list, 1)
			l := srv.runTurns(list, prompts)
			srv.stop()
			per[k] = l.cpuPerTurn()
			cpu[k] = append(cpu[k], per[k])
			rate[k] = append(rate[k], l.turnsPerSec())
		}
		for k := range stores {
			ratio[k] = append(ratio[k], per[k]/per[0])
		}
		round++
	}
	for k, st := range stores {
		b.ReportMetric(medianOf(cpu[k]), "cpu-µs/turn-"+st.name)
		b.ReportMetric(medianOf(rate[k]), "turns/s-"+st.name)
		if k > 0 {
			b.ReportMetric(medianOf(ratio[k]), st.name+"/memory")
		}
	}
}

// perTurn returns d per turn in µs.
func (l turnLoad) perTurn(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(l.turns)
}

// BenchmarkServeLoad200x5 runs 200 sessions at once against skein serve
// at its default --max-running, each sending 5 prompts in turn (the
// next after the last one's turn ended), on each store: a prompt refused
// with 429 is sent again after 20 ms. Reported per store, medians over
// the rounds (-benchtime 5x: five): p50 and p99 of the time from a
// prompt's first POST to its reply's arrival over SSE, the 429 answers
// of a round, turns per second (1,000 turns over the time from the first
// prompt to the last turn's end) and the server's CPU µs per turn; and,
// to show where the 2 cores went, the load generator's CPU µs per turn
// (cpu-µs/turn-client-…) and, on PostgreSQL, the CPU µs per turn of the
// machine's postgres processes (cpu-µs/turn-database-postgres: every
// client of that server counts, so take it from a quiet machine).
func BenchmarkServeLoad200x5(b *testing.B) {
	const sessionsN, prompts = 200, 5
	stores := benchStores(b)
	metrics := make([][7][]float64, len(stores))
	round := 0
	for b.Loop() {
		for j := range stores {
			k := (j + round) % len(stores)
			srv := startBenchServe(b, stores[k].newStore(b), sessionsN)
			list := srv.newSessions(sessionsN)
			l := srv.runTurns(list, prompts)
			srv.stop()
			for m, v := range []float64{l.quantile(0.5), l.quantile(0.99), float64(l.refused), l.turnsPerSec(), l.cpuPerTurn(),
				l.perTurn(l.client), l.perTurn(l.database)} {
				metrics[k][m] = append(metrics[k][m], v)
			}
		}
		round++
	}
	for k, st := range stores {
		for m, unit := range []string{"p50-ms", "p99-ms", "429s", "turns/s", "cpu-µs/turn", "cpu-µs/turn-client", "cpu-µs/turn-database"} {
			if unit == "cpu-µs/turn-database" && st.name != "postgres" {
				continue
			}
			b.ReportMetric(medianOf(metrics[k][m]), unit+"-"+st.name)
		}
	}
}
