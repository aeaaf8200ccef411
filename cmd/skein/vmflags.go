package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/internal/didyoumean"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/llm/providers"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/export"
	"github.com/skein-dev/skein/telemetry"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// vmFlags are the flags shared by the commands that run Starlark (run,
// repl, test).
type vmFlags struct {
	sessionCap int
	maxSteps   uint64
	timeout    time.Duration
	maxTurns   int
	provider   string
	model      string
	replay     string
	replayMode string
	record     string
	workspace  string
	fsScope    string
	tier       workspace.Tier // fsScope parsed by check
	allowCmd   listFlag
	allowNet   listFlag
	approve    string
	allowEnv   listFlag
	maxRead    int64     // --max-read-bytes
	store      storeFlag // memory unless registerStore added --store
	eventLog   string    // --event-log DIR (skein run only)
	trace      bool      // -v/--verbose: a line per event on stderr (skein run only)
	pricesFile string
	maxCost    float64
	prices     *llm.Prices // the table, --prices over the built-in one (set by check)
	budget     *llm.Budget // every call of the run counts here (set by check)
	envErr     error       // an environment variable the flags could not take (reported by check)
}

// listFlag is a comma-separated list flag that may be repeated:
// --allow-cmd go,git --allow-cmd make.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

// Set appends the comma-separated entries of v (spaces around them are
// ignored; an empty entry is an error).
func (l *listFlag) Set(v string) error {
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return errors.New("empty entry in a comma-separated list")
		}
		*l = append(*l, item)
	}
	return nil
}

// register adds the flags of vmFlags to fs.
func (f *vmFlags) register(fs *flag.FlagSet) {
	f.envErr = registerFlags(fs, f.flags())
}

// flags is the table of the flags shared by run, repl, test and serve.
func (f *vmFlags) flags() []flagDef {
	return []flagDef{
		{name: "session-cap", value: &f.sessionCap, def: strconv.Itoa(sessions.DefaultCap), env: "SKEIN_SESSION_CAP",
			usage: "live sessions kept in memory (LRU)"},
		{name: "max-steps", value: &f.maxSteps, usage: "bound on Starlark execution steps per thread (0: none)"},
		{name: "timeout", value: &f.timeout, usage: "cancel the run after this long, e.g. 30s (0: none)"},
		{name: "max-turns", value: &f.maxTurns, def: strconv.Itoa(vm.DefaultMaxTurns), usage: "default hard cap on agent_loop turns per session"},
		{name: "provider", value: &f.provider, env: "SKEIN_PROVIDER", usage: "default model provider: mock, openai, anthropic, ollama, ..."},
		{name: "model", value: &f.model, usage: "default model id"},
		{name: "llm-replay", value: &f.replay, usage: "answer model calls from this JSONL fixture only (offline, deterministic)"},
		{name: "llm-replay-mode", value: &f.replayMode, def: string(mock.ReplayStrict),
			usage: "strict: each request must match the one its fixture line recorded (a diff says what changed); order: answer in order, ignoring the requests"},
		{name: "llm-record", value: &f.record, usage: "record every real model call to this JSONL fixture for --llm-replay (its directory is created)"},
		{name: "workspace", value: &f.workspace, usage: "workspace root for fs, exec, http and the agent tools (default: the script's directory; the working directory for repl)"},
		{name: "fs-scope", value: &f.fsScope, def: "sandboxed", usage: "file access: sandboxed (inside the workspace), project (read the git project, write the workspace) or full"},
		{name: "prices", value: &f.pricesFile, usage: "a JSON price table whose models override or add to the built-in one (see docs/providers.md)"},
		{name: "max-cost-usd", value: &f.maxCost, usage: "stop before any model call that would take the run's cost over this many US dollars (0: no cap)"},
		{name: "allow-cmd", value: &f.allowCmd, usage: "commands exec.run, tools.run_command and mcp_server may run, comma-separated, repeatable (default: none)"},
		{name: "allow-env", value: &f.allowEnv, usage: "environment variables exec.run's and mcp_server's env may set (an MCP server also gets those of skein's environment): NAME, PREFIX_*, or * (only names known to be safe: LANG, TZ, NO_COLOR, *_API_KEY, ...; see docs/security.md); loader and interpreter hooks such as LD_PRELOAD are never allowed; comma-separated, repeatable (default: none)"},
		{name: "allow-net", value: &f.allowNet, usage: "hosts http, tools.http_get and mcp_server may reach: host, host:port, *.domain, IP; comma-separated, repeatable (default: none)"},
		{name: "max-read-bytes", value: &f.maxRead, def: strconv.Itoa(workspace.DefaultMaxReadBytes), usage: "the largest file fs.read, fs.read_jsonl, fs.read_csv and load() read whole, in bytes"},
		{name: "approve", value: &f.approve, usage: "calls of tools a bound agent lists in approve: yes, no, or ask (on the terminal; default ask when stdin and stderr are terminals, else no)"},
	}
}

// registerStore adds --store to fs: the commands whose sessions outlive
// them (run, repl) call it after register; skein test does not, so its
// VMs keep the in-memory store.
func (f *vmFlags) registerStore(fs *flag.FlagSet) {
	f.store.register(fs)
}

// registerEventLog adds --event-log to fs (skein run).
func (f *vmFlags) registerEventLog(fs *flag.FlagSet) {
	registerFlags(fs, []flagDef{{name: "event-log", value: &f.eventLog,
		usage: "write a forensic log per session into this directory as the run goes: <id>.jsonl, one record per event, the footer at the end"}})
}

// registerTrace adds -v and --verbose to fs (skein run).
func (f *vmFlags) registerTrace(fs *flag.FlagSet) {
	const usage = "print a line per event on stderr as the run goes: turns, model calls (model, tokens, latency), tool calls (status, duration), compactions, errors; coloured on a terminal unless NO_COLOR is set"
	registerFlags(fs, []flagDef{
		{name: "v", value: &f.trace, usage: usage},
		{name: "verbose", value: &f.trace, usage: "the same as -v"},
	})
}

// check validates flag values, returning a usage message.
func (f *vmFlags) check() error {
	if f.envErr != nil {
		return f.envErr
	}
	if err := f.store.check(); err != nil {
		return err
	}
	if f.sessionCap < 1 {
		return fmt.Errorf("--session-cap must be >= 1, got %d", f.sessionCap)
	}
	if f.maxTurns < 1 {
		return fmt.Errorf("--max-turns must be >= 1, got %d", f.maxTurns)
	}
	if f.maxRead < 1 {
		return fmt.Errorf("--max-read-bytes must be >= 1, got %d", f.maxRead)
	}
	if f.timeout < 0 {
		return fmt.Errorf("--timeout must not be negative")
	}
	if f.approve != "" && f.approve != "yes" && f.approve != "no" && f.approve != "ask" {
		return fmt.Errorf("--approve must be yes, no or ask, got %q", f.approve)
	}
	if f.replay != "" && f.record != "" {
		return fmt.Errorf("--llm-replay and --llm-record cannot be used together")
	}
	if err := checkProvider(f.provider); err != nil {
		return err
	}
	if !slices.Contains(mock.ReplayModes, f.replayMode) {
		return fmt.Errorf("--llm-replay-mode: unknown mode '%s' (expected one of: %s)", sessions.Escape(f.replayMode), strings.Join(mock.ReplayModes, ", "))
	}
	tier, err := workspace.ParseTier(f.fsScope)
	if err != nil {
		return fmt.Errorf("--fs-scope: %v", err)
	}
	f.tier = tier
	if !(f.maxCost >= 0) || math.IsInf(f.maxCost, 0) {
		return fmt.Errorf("--max-cost-usd must be a finite number >= 0")
	}
	f.prices = llm.DefaultPrices()
	if f.pricesFile != "" {
		if f.prices, err = llm.LoadPrices(f.pricesFile); err != nil {
			return fmt.Errorf("--prices %s: %v", f.pricesFile, underlying(err))
		}
	}
	f.budget = &llm.Budget{MaxUSD: f.maxCost}
	return nil
}

// costSettings gives a VM's provider settings the run's price table and
// budget.
func (f *vmFlags) costSettings(s *llm.Settings) {
	if f.prices != nil {
		s.Prices, s.Budget = f.prices, f.budget
	}
}

// checkProvider refuses a --provider (or SKEIN_PROVIDER) that names no
// provider at start, not at the first model call: the mock, an
// OpenAI-compatible server (openai_compatible, with base_url in the
// script) or a preset.
func checkProvider(name string) error {
	if name == "" {
		return nil
	}
	known := append([]string{llm.ProviderMock, llm.ProviderOpenAICompatible}, llm.PresetNames()...)
	sort.Strings(known)
	if slices.Contains(known, name) {
		return nil
	}
	hint := ""
	if near := didyoumean.Closest(name, known); near != "" {
		hint = fmt.Sprintf("did you mean '%s'? ", near)
	}
	return fmt.Errorf("--provider: unknown provider '%s' (%sexpected one of: %s; another OpenAI-compatible server is provider=NAME with base_url= in the script)", sessions.Escape(name), hint, strings.Join(known, ", "))
}

// policy builds the workspace policy from the flags (after check); root
// is the default workspace root (the script's directory for run, the
// working directory for repl).
func (f *vmFlags) policy(root string) (*workspace.Policy, error) {
	if f.workspace != "" {
		root = f.workspace
		fi, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("--workspace %s: %v", root, underlying(err))
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("--workspace %s: not a directory", root)
		}
	}
	return workspace.New(workspace.Config{Root: root, Tier: f.tier, AllowCmds: f.allowCmd, AllowNet: f.allowNet, AllowEnv: f.allowEnv, MaxReadBytes: f.maxRead})
}

// vmConfig is what a command adds to the shared flags to build a VM.
type vmConfig struct {
	root  string   // directory load() may not escape; the default workspace root
	args  []string // argv
	clock func() time.Time
	ids   func() string
	// rerecord returns the command that records the --llm-replay fixture
	// again, given the flags to add (the provider and model the fixture
	// supplied); nil: none is shown.
	rerecord func(extra []string) string
	// openStore opens an existing store file at once (serve: a bad file
	// is reported at start, not at the first request); otherwise the
	// first call that needs it opens it.
	openStore bool
	// middleware, if set, wraps every real provider (skein eval's
	// response cache); --llm-record's recorder replaces it.
	middleware func(llm.Provider) llm.Provider
}

// newState builds a VM from the flags. The returned close function
// flushes the --llm-record file and releases the store.
func (f *vmFlags) newState(std stdio, c vmConfig) (*vm.State, func() error, error) {
	clock, ids := c.clock, c.ids
	if clock == nil {
		clock = time.Now
	}
	if ids == nil {
		ids = vm.UUIDv7
	}
	policy, err := f.policy(c.root)
	if err != nil {
		return nil, nil, err
	}
	open := f.store.open
	if c.openStore {
		open = f.store.openNow
	}
	backend, err := open()
	if err != nil {
		return nil, nil, err
	}
	opts := []sessions.Option{sessions.WithCap(f.sessionCap), sessions.WithClock(clock), sessions.WithIDs(ids)}
	var eventLog *export.ForensicLog
	if f.eventLog != "" {
		if eventLog, err = export.NewForensicLog(f.eventLog); err != nil {
			backend.Close()
			return nil, nil, fmt.Errorf("--event-log: %v", underlying(err))
		}
		opts = append(opts, sessions.WithEventSink(eventLog))
	}
	store, err := sessions.NewStore(backend, opts...)
	if err != nil {
		backend.Close()
		return nil, nil, err
	}
	if f.trace {
		store.ObserveLogged(newTracer(std.err, colorOn(std.err, os.Getenv)).event)
	}
	settings := providers.Default(os.Getenv)
	settings.Provider, settings.Model = f.provider, f.model
	settings.Middleware = c.middleware
	f.costSettings(settings)
	queue := mock.New()
	closers := []func() error{store.Shutdown}
	if eventLog != nil {
		closers = append(closers, func() error {
			if err := eventLog.Close(context.Background(), store); err != nil {
				return fmt.Errorf("--event-log: %v", err)
			}
			return nil
		})
	}
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	if f.replay != "" {
		resps, err := readFixture(f.replay)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--llm-replay: %v", err)
		}
		extra := replayDefaults(settings, resps)
		r := mock.Replay{Fixture: f.replay, Mode: mock.ReplayMode(f.replayMode)}
		if c.rerecord != nil {
			r.Rerecord = c.rerecord(extra)
		}
		replay(queue, r, resps)
	}
	if f.record != "" {
		// Create the fixture's directory (recording into testdata/ of a
		// fresh checkout is the usual first use).
		if err := os.MkdirAll(filepath.Dir(f.record), 0o755); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--llm-record: %v", err)
		}
		file, err := os.OpenFile(f.record, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("--llm-record: %v", err)
		}
		rec := mock.NewRecorder(file)
		settings.Middleware = rec.Wrap
		closers = append(closers, func() error { return errors.Join(rec.Err(), file.Close()) })
	}
	st, err := builtins.NewState(vm.Options{
		Store: store, Clock: clock, NewID: ids, Stdout: std.out, Stderr: std.err,
		MaxSteps: f.maxSteps, MaxTurns: f.maxTurns, Args: c.args, Root: c.root, LLM: settings, Mock: queue,
		Workspace: policy, Approve: f.approval(std),
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	// What the script started (MCP servers) stops before the store does.
	return st, func() error { return errors.Join(st.Close(), closeAll()) }, nil
}

// replayDefaults makes a fixture answer a run that names no provider:
// the provider (and, for it, the model) of its first recorded request
// become the defaults; a fixture that recorded none is answered as the
// mock. It returns the flags that say so, for the command that records
// the fixture again.
func replayDefaults(settings *llm.Settings, resps []mock.Response) []string {
	if settings.Provider != "" {
		return nil
	}
	defer func() {
		if settings.Provider == "" {
			settings.Provider = llm.ProviderMock
		}
	}()
	for _, r := range resps {
		if r.Recorded == nil || r.Recorded.Provider == "" {
			continue
		}
		settings.Provider = r.Recorded.Provider
		extra := []string{"--provider", r.Recorded.Provider}
		if settings.Model == "" && r.Recorded.Model != "" {
			settings.Model = r.Recorded.Model
			extra = append(extra, "--model", r.Recorded.Model)
		}
		return extra
	}
	return nil
}

// rerecordCommand is the skein command line that records fixture again:
// cmd's flags as given (without the replay ones), extra, --llm-record
// fixture and the positional arguments.
func rerecordCommand(fs *flag.FlagSet, fixture string, extra []string) string {
	words := []string{fs.Name()}
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "llm-replay" && f.Name != "llm-replay-mode" {
			words = append(words, "--"+f.Name, f.Value.String())
		}
	})
	words = append(words, extra...)
	words = append(words, "--llm-record", fixture)
	words = append(words, fs.Args()...)
	for i, w := range words[1:] {
		words[i+1] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

// shellQuote quotes w for a POSIX shell when it needs it.
func shellQuote(w string) string {
	if w != "" && strings.IndexFunc(w, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ',' || r == ':' || r == '=' || r == '@' || r == '+' ||
			r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// readFixture reads a JSONL fixture of model responses.
func readFixture(path string) ([]mock.Response, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	return mock.LoadFixture(file, path)
}

// replay queues a fixture's responses (read by readFixture) and puts the
// mock in replay mode.
func replay(queue *mock.Mock, r mock.Replay, resps []mock.Response) {
	for _, resp := range resps {
		queue.Queue(resp)
	}
	queue.SetReplay(r)
}

// errInterrupted is the cancellation cause of a run stopped by Ctrl-C.
var errInterrupted = errors.New("interrupted")

// runContext returns the context of one run: cancelled by SIGINT/SIGTERM
// (a second signal exits at once; see watchSignals) and by the timeout,
// if any, and carrying the tracer the OTEL_* variables ask for (see
// package telemetry), whose spans the returned stop function exports.
// Tracing problems are reported on errw.
func runContext(timeout time.Duration, errw io.Writer) (context.Context, func()) {
	tracer := telemetry.FromEnv(errw)
	ctx, cancel := context.WithCancelCause(telemetry.With(context.Background(), tracer))
	unwatch := watchSignals(cancel)
	stop := func() {
		unwatch()
		cancel(nil)
		tracer.Close()
	}
	if timeout > 0 {
		tctx, tcancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timeout: the run exceeded --timeout %s", timeout))
		return tctx, func() { tcancel(); stop() }
	}
	return ctx, stop
}
