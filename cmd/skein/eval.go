package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/eval"
	"github.com/skein-dev/skein/eval/evalfile"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

const evalUsage = "[flags] FILE.star"

// evalFlags are the flags of `skein eval` besides the VM's.
type evalFlags struct {
	variants  variantFlag
	repeat    int
	parallel  int
	baseline  string
	failUnder listFlag
	jsonFile  string
	htmlFile  string
	noCache   bool
	progress  string
}

// variantFlag is a repeatable --variant KEY=VALUE,...: one variant each.
type variantFlag []map[string]starlark.Value

func (v *variantFlag) String() string { return "" }

// Set reads one variant: comma-separated KEY=VALUE pairs; a value is an
// int, a float, True, False or None when it reads as one, else a string.
func (v *variantFlag) Set(s string) error {
	m := map[string]starlark.Value{}
	for pair := range strings.SplitSeq(s, ",") {
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("%q: want KEY=VALUE pairs separated by commas", pair)
		}
		if _, dup := m[k]; dup {
			return fmt.Errorf("key %q given twice", k)
		}
		m[k] = flagValue(strings.TrimSpace(val))
	}
	*v = append(*v, m)
	return nil
}

func flagValue(s string) starlark.Value {
	switch s {
	case "True", "true":
		return starlark.True
	case "False", "false":
		return starlark.False
	case "None":
		return starlark.None
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return starlark.MakeInt64(i)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return starlark.Float(f)
	}
	return starlark.String(s)
}

func (f *evalFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.variants, "variant", "a variant: `KEY=VALUE,...` (agent_loop options, system, name); repeat for more; replaces the file's VARIANTS")
	fs.IntVar(&f.repeat, "repeat", 1, "run each case `N` times under each variant")
	fs.IntVar(&f.parallel, "p", eval.DefaultParallel, "run `N` cases at once")
	fs.StringVar(&f.baseline, "baseline", "", "compare with eval run `RUN` (default: the previous run of the same file)")
	fs.Var(&f.failUnder, "fail-under", "exit 1 when a variant's mean score of a scorer is under X: `SCORER=X,...` (repeatable)")
	fs.StringVar(&f.jsonFile, "json", "", "write the run as JSON to `FILE`")
	fs.StringVar(&f.htmlFile, "html", "", "write a self-contained HTML report to `FILE`")
	fs.BoolVar(&f.noCache, "no-cache", false, "send every model request to its provider (by default a request answered before, in this repeat, is answered from the store's response cache)")
	fs.StringVar(&f.progress, "progress", "auto", "progress bar on stderr: `auto` (on a terminal), always, never")
}

// evalCommand implements `skein eval FILE.star`.
func evalCommand(args []string, std stdio) int {
	fs := newFlagSet("eval")
	var vf vmFlags
	vf.register(fs)
	vf.registerStore(fs)
	var ef evalFlags
	ef.register(fs)
	if code, stop := parseFlags(fs, evalUsage, args, std); stop {
		return code
	}
	if err := vf.check(); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	switch {
	case fs.NArg() == 0:
		return usageError(std, fs.Name(), "missing FILE.star to evaluate")
	case fs.NArg() > 1:
		return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q after the eval file (flags go before FILE)", fs.Arg(1)))
	case ef.repeat < 1:
		return usageError(std, fs.Name(), "-repeat must be at least 1")
	case ef.parallel < 1:
		return usageError(std, fs.Name(), "-p must be at least 1")
	case ef.progress != "auto" && ef.progress != "always" && ef.progress != "never":
		return usageError(std, fs.Name(), fmt.Sprintf("-progress %q: want auto, always or never", ef.progress))
	}
	if vf.record != "" || vf.replay != "" {
		// A fixture holds the calls in the order they were made: recording
		// and replay run the cases one at a time, in order.
		ef.parallel = 1
	}
	var thresholds []eval.Threshold
	for _, s := range ef.failUnder {
		t, err := eval.ParseThreshold(s)
		if err != nil {
			return usageError(std, fs.Name(), "-fail-under "+err.Error())
		}
		thresholds = append(thresholds, t)
	}
	file := fs.Arg(0)
	src, err := os.ReadFile(file)
	if err != nil {
		return usageError(std, fs.Name(), fmt.Sprintf("cannot read %s: %v", file, underlying(err)))
	}
	name, err := filepath.Abs(file)
	if err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	// The cache answers real providers' requests; recording needs every
	// request to reach its provider, and a replay is answered from its
	// fixture in order, so neither goes through it.
	useCache := !ef.noCache && vf.record == "" && vf.replay == ""
	var cache *eval.Cache
	cfg := vmConfig{root: filepath.Dir(file)}
	if useCache {
		cfg.middleware = func(p llm.Provider) llm.Provider { return cache.Wrap(p) }
	}
	st, closeVM, err := vf.newState(std, cfg)
	if err != nil {
		return failState(std, fs.Name(), err)
	}
	ctx, stopRun := runContext(vf.timeout, std.err)
	defer stopRun()
	end := st.Begin(ctx)
	code := runEval(ctx, std, st, &vf, &ef, thresholds, file, name, src, &cache, useCache)
	end()
	if err := closeVM(); err != nil && code == exitOK {
		fmt.Fprintf(std.err, "skein eval: %v\n", err)
		return exitFailed
	}
	return code
}

// runEval runs the eval file on st and reports; it returns the exit code.
func runEval(ctx context.Context, std stdio, st *vm.State, vf *vmFlags, ef *evalFlags, thresholds []eval.Threshold,
	file, name string, src []byte, cache **eval.Cache, useCache bool) int {
	globals, err := st.ExecFile(file, src)
	if err != nil {
		return scriptFailed(std, vf, err)
	}
	if useCache {
		if *cache, err = eval.OpenCache(ctx, st.Store); err != nil {
			fmt.Fprintf(std.err, "skein eval: response cache: %v\n", err)
			return exitFailed
		}
	}
	runID := "eval-" + st.NewID()
	var variants []map[string]starlark.Value
	if len(ef.variants) > 0 {
		variants = ef.variants
	}
	suite, err := evalfile.NewStarlarkSuite(evalfile.StarlarkConfig{State: st, Globals: globals, RunID: runID, Variants: variants,
		CheckOptions: builtins.CheckCallDefaults})
	if err != nil {
		fmt.Fprintf(std.err, "skein eval: %s: %v\n", file, err)
		return exitFailed
	}
	defer suite.Close()
	opts := eval.Options{ID: runID, Name: name, File: file, Repeat: ef.repeat, Parallel: ef.parallel, Clock: st.Clock}
	showProgress := ef.progress == "always" || ef.progress == "auto" && isTerminal(std.err)
	if showProgress {
		opts.Progress = func(p eval.Progress) { fmt.Fprint(std.err, "\r"+progressBar(p)) }
	}
	rec, err := eval.Run(ctx, suite, opts)
	if showProgress {
		fmt.Fprint(std.err, "\r\033[K")
	}
	if useCache {
		if serr := (*cache).Save(context.WithoutCancel(ctx)); serr != nil {
			fmt.Fprintf(std.err, "skein eval: response cache: %v\n", serr)
		}
	}
	if err != nil {
		fmt.Fprintf(std.err, "skein eval: %s: %s\n", file, vm.FormatError(err))
		return exitFailed
	}
	base, err := baselineOf(ctx, st.Store, ef.baseline, name, runID)
	if err != nil {
		fmt.Fprintf(std.err, "skein eval: -baseline: %v\n", err)
		return exitFailed
	}
	if base != nil {
		rec.Comparison = eval.Compare(rec, base)
	}
	if err := eval.Save(context.WithoutCancel(ctx), st.Store, rec); err != nil && !errorsIsNoRuns(err) {
		fmt.Fprintf(std.err, "skein eval: storing the run: %v\n", err)
		return exitFailed
	}
	if err := eval.WriteText(std.out, rec); err != nil {
		return exitFailed
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer, *eval.Record) error
	}{{ef.jsonFile, eval.WriteJSON}, {ef.htmlFile, eval.WriteHTML}} {
		if out.path == "" {
			continue
		}
		if err := writeReport(out.path, rec, out.write); err != nil {
			fmt.Fprintf(std.err, "skein eval: %v\n", err)
			return exitFailed
		}
	}
	missed, err := eval.Missed(rec, thresholds)
	if err != nil {
		fmt.Fprintf(std.err, "skein eval: %v\n", err)
		return exitUsage
	}
	if len(missed) > 0 {
		for _, m := range missed {
			fmt.Fprintf(std.err, "skein eval: fail-under: %s\n", m)
		}
		return exitFailed
	}
	return exitOK
}

func errorsIsNoRuns(err error) bool { return errors.Is(err, sessions.ErrNoRuns) }

// baselineOf returns the run to compare with: --baseline's, else the
// previous run of the same file (nil when there is none).
func baselineOf(ctx context.Context, store *sessions.Store, id, name, except string) (*eval.Record, error) {
	if id != "" {
		return eval.Load(ctx, store, id)
	}
	return eval.Previous(ctx, store, name, except)
}

func writeReport(path string, rec *eval.Record, write func(io.Writer, *eval.Record) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, underlying(err))
	}
	if err := write(f, rec); err != nil {
		f.Close()
		return fmt.Errorf("%s: %v", path, err)
	}
	return f.Close()
}

// progressBar is one line: a bar of the jobs done, the pass rate so far
// and the cost so far.
func progressBar(p eval.Progress) string {
	const width = 30
	filled := 0
	if p.Total > 0 {
		filled = p.Done * width / p.Total
	}
	pass := "-"
	if p.Scored > 0 {
		pass = fmt.Sprintf("%.0f%%", 100*float64(p.Passed)/float64(p.Scored))
	}
	return fmt.Sprintf("[%s%s] %d/%d cases  pass %s  $%.4f", strings.Repeat("#", filled), strings.Repeat(".", width-filled), p.Done, p.Total, pass, p.CostUSD)
}
