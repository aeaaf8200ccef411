package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/llm/providers"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

const testUsage = "[flags] [PATH...]"

// testOptions are the flags of `skein test` other than the shared VM
// flags.
type testOptions struct {
	run      *regexp.Regexp // nil: every test
	verbose  bool
	json     bool
	junit    string
	parallel int
	shard    shard
	failFast bool
	count    int // runs of each test
}

// shard selects the tests of machine index (1-based) out of count; count
// 0 selects every test.
type shard struct{ index, count int }

// testCommand implements `skein test [PATH...]`: it runs every test_*
// function of the *_test.star files under the paths, each in a fresh
// test VM, and reports failures with their positions. The exit code is 1
// when a test failed or errored.
func testCommand(args []string, std stdio) int {
	fs := newFlagSet("test")
	var vf vmFlags
	vf.register(fs)
	fs.Lookup("timeout").Usage = "fail each test that runs longer than this, e.g. 30s (0: none)"
	fs.Lookup("llm-replay").Usage = "answer the model calls of every test from this JSONL fixture (a test file's own <name>.llm.jsonl wins)"
	var opts testOptions
	var runExpr, shardSpec string
	store := storeFlag{registered: true, durability: string(sessions.DurabilityProcess)}
	registerFlags(fs, []flagDef{
		{name: "store", value: &store.path, def: storeMemory, usage: "also keep every test's sessions in this store (an SQLite file or a postgres:// URL), under test-<run id>/<file>::<test>/; the tests still run each on its own in-memory store"},
		store.keyFlagDef(),
		{name: "run", value: &runExpr, usage: "run only the tests whose function name matches this regular expression"},
		{name: "v", value: &opts.verbose, usage: "print every test's name, status, duration and printed output"},
		{name: "json", value: &opts.json, usage: "print the events of the run on stdout in go test -json's format (test2json), for gotestsum, IDEs and CI tools"},
		{name: "junit", value: &opts.junit, usage: "also write a JUnit XML report to this file"},
		{name: "parallel", value: &opts.parallel, def: strconv.Itoa(runtime.NumCPU()), defDoc: "the number of cores", usage: "how many tests run at once"},
		{name: "shard", value: &shardSpec, usage: "run only shard I of N, written I/N with 1 <= I <= N: a stable split of the tests across CI machines"},
		{name: "fail-fast", value: &opts.failFast, usage: "start no test after the first failure"},
		{name: "count", value: &opts.count, def: "1", usage: "run each test this many times (each file's tests in turn, then again)"},
	})
	if code, stop := parseFlags(fs, testUsage, args, std); stop {
		return code
	}
	if !flagSet(fs, "provider") {
		vf.provider = "" // tests are hermetic: SKEIN_PROVIDER does not apply
	}
	if err := vf.check(); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	if vf.record != "" {
		return usageError(std, fs.Name(), "--llm-record cannot be used with skein test (tests are offline; record with skein run)")
	}
	if opts.parallel < 1 {
		return usageError(std, fs.Name(), fmt.Sprintf("-parallel must be >= 1, got %d", opts.parallel))
	}
	if opts.count < 1 {
		return usageError(std, fs.Name(), fmt.Sprintf("-count must be >= 1, got %d", opts.count))
	}
	if runExpr != "" {
		re, err := regexp.Compile(runExpr)
		if err != nil {
			return usageError(std, fs.Name(), fmt.Sprintf("-run: %v", err))
		}
		opts.run = re
	}
	if shardSpec != "" {
		s, err := parseShard(shardSpec)
		if err != nil {
			return usageError(std, fs.Name(), err.Error())
		}
		opts.shard = s
	}
	var global *fixture
	if vf.replay != "" {
		resps, err := readFixture(vf.replay)
		if err != nil {
			return usageError(std, fs.Name(), fmt.Sprintf("--llm-replay: %v", err))
		}
		global = &fixture{path: vf.replay, responses: resps}
	}
	paths, only := splitTestIDs(fs.Args())
	if len(paths) == 0 {
		paths = []string{"."}
	}
	files, err := findTestFiles(paths)
	if err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	var junit *os.File
	if opts.junit != "" {
		if junit, err = os.Create(opts.junit); err != nil {
			return usageError(std, fs.Name(), fmt.Sprintf("--junit: %v", err))
		}
		defer junit.Close()
	}

	var rec *testRecorder
	if !store.memory() {
		if rec, err = newTestRecorder(&store); err != nil {
			return failState(std, fs.Name(), err)
		}
	}
	started := time.Now()
	ctx, stopRun := runContext(0, std.err)
	defer stopRun()
	suite := loadTestFiles(ctx, files, global, opts.parallel, func(f *testFile) *vm.TestRunner {
		root, fx := filepath.Dir(f.path), f.fixture
		runner := &vm.TestRunner{Timeout: vf.timeout, Context: ctx, NewState: func(stdout io.Writer) (*vm.State, error) {
			return vf.testVM(stdout, root, fx)
		}}
		if rec != nil {
			runner.Done = rec.done
		}
		return runner
	})
	cases := repeatCases(selectTests(suite, opts.run, only, opts.shard), opts.count)

	// With --json stdout is the event stream alone, and the summary is
	// not printed (the stream has every result; a tool reading it makes
	// its own): stderr has only what explains a failed run.
	summary := std.out
	var rep reporter
	if opts.json {
		rep, summary = newJSONReport(std.out), io.Discard
	} else {
		rep = &textReport{w: std.out, verbose: opts.verbose, line: newProgressLine(std.out)}
	}
	rep = &byFile{reporter: rep}
	var all []vm.TestResult
	var t tally
	notRun := runTests(ctx, cases, opts.parallel, opts.failFast, func(res vm.TestResult) {
		all = append(all, res)
		t.add(res)
		rep.result(res)
	}, rep.progress)
	rep.done()

	notes := summary // what says why tests did not run
	if opts.json {
		notes = std.err
	}
	// Test ids that name no test are an error (a typo); a -run pattern
	// that matches nothing is not, as with go test.
	noMatch := len(cases) == 0 && len(only) > 0
	switch {
	case noMatch:
		fmt.Fprintf(std.err, "skein test: no test named %s\n", strings.Join(fs.Args(), " "))
	case len(cases) == 0 && opts.run != nil:
		fmt.Fprintf(std.err, "skein test: no tests to run (-run %q matches no test in %s)\n", opts.run, strings.Join(paths, " "))
	case len(cases) == 0:
		fmt.Fprintln(std.err, "skein test: no tests to run")
	}
	switch {
	case notRun > 0 && ctx.Err() != nil:
		fmt.Fprintf(notes, "interrupted: %d not run\n", notRun)
	case notRun > 0:
		fmt.Fprintf(notes, "stopped at the first failure (--fail-fast): %d not run\n", notRun)
	}
	if usd, known := vf.budget.Spent(); known && usd > 0 {
		fmt.Fprintf(summary, "cost: $%.6f (prices of %s)\n", usd, vf.prices.TableDate())
	}
	code := exitOK
	if rec != nil {
		if err := rec.close(std, func(line string) { fmt.Fprintln(summary, line) }); err != nil {
			code = exitFailed
		}
	}
	fmt.Fprintln(summary, t.summary(time.Since(started)))
	if t.failed > 0 || ctx.Err() != nil || noMatch {
		code = exitFailed
	}
	if junit != nil {
		if err := writeJUnit(junit, all); err != nil {
			fmt.Fprintf(std.err, "skein test: --junit: %v\n", err)
			code = exitFailed
		}
	}
	return code
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseShard parses "I/N".
func parseShard(s string) (shard, error) {
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || count < 1 || index < 1 || index > count {
		return shard{}, fmt.Errorf("--shard must be I/N with 1 <= I <= N, got %q", s)
	}
	return shard{index: index, count: count}, nil
}

// fixture is a JSONL fixture of model responses, read once and queued
// into the mock of every test VM that uses it.
type fixture struct {
	path      string
	responses []mock.Response
}

// testVM builds the VM of one test, or of the discovery of a test file:
// builtins.NewTestState (every builtin plus assert and skip, the fixed
// clock, seeded ids) with its own in-memory store, the shared limits, the
// mock as the default provider, an empty environment (so real providers
// have no keys) and fx, if any, queued in replay mode. Print and
// diagnostics go to stdout.
func (f *vmFlags) testVM(stdout io.Writer, root string, fx *fixture) (*vm.State, error) {
	ids := builtins.TestIDs(1) // session and message ids from one sequence
	store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(f.sessionCap), sessions.WithClock(builtins.TestClock), sessions.WithIDs(ids))
	if err != nil {
		return nil, err
	}
	settings := providers.Default(func(string) string { return "" })
	settings.Provider, settings.Model = f.provider, f.model
	f.costSettings(settings)
	queue := mock.New()
	if fx != nil {
		replayDefaults(settings, fx.responses)
		replay(queue, mock.Replay{Fixture: fx.path, Mode: mock.ReplayMode(f.replayMode),
			Rerecord: fmt.Sprintf("skein run --llm-record %s PIPELINE.star (the pipeline whose calls it holds)", shellQuote(fx.path))}, fx.responses)
	}
	if settings.Provider == "" {
		settings.Provider = llm.ProviderMock
	}
	return builtins.NewTestState(vm.Options{
		Store: store, NewID: ids, Stdout: stdout, Stderr: stdout, Root: root,
		MaxSteps: f.maxSteps, MaxTurns: f.maxTurns, LLM: settings, Mock: queue,
	}, 1)
}
