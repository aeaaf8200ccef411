package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/chzyer/readline"
	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/telemetry"
	"github.com/skein-dev/skein/vm"
)

const replUsage = "[flags]"

// Prompts of the interactive REPL.
const (
	primaryPrompt      = ">>> "
	continuationPrompt = "... "
)

const replHelp = `Type Starlark statements or expressions; a bare expression's value is
printed and bound to _. A def, if, for or while ends with a blank line;
its lines start indented (Enter on the indentation alone ends it).
load() paths are relative to the working directory.

  Tab      complete names, builtins and attributes (x.<Tab>)
  Up/Down  earlier inputs, a whole def as one (↵ between its lines)
  Ctrl-C   cancel the running input (or the line being typed)
  Ctrl-D   exit

help() lists the builtins; help(agent_loop) shows one's signature.
agent_session_open(ID) resumes a stored session of that id (the REPL
says so); a new id starts a fresh one.

Commands:
  :help      this help
  :sessions  the live sessions: id, messages, turns, status
  :export NAME [ID] [--with-test]
             write the current session (the most recently used one, or
             ID) as a pipeline: NAME.star and NAME.llm.jsonl (and
             NAME_test.star), replayed with
             skein run --llm-replay NAME.llm.jsonl NAME.star
  :quit      exit
`

// replCommand implements `skein repl`: a read-eval-print loop on the VM
// `skein run` uses. On a terminal it edits lines with history and
// completion; with piped input it prints only results and errors.
func replCommand(args []string, std stdio) int {
	fs := newFlagSet("repl")
	var vf vmFlags
	vf.register(fs)
	vf.registerStore(fs)
	fs.Lookup("timeout").Usage = "cancel each input after this long, e.g. 30s (0: none)"
	if code, stop := parseFlags(fs, replUsage, args, std); stop {
		return code
	}
	if err := vf.check(); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	if fs.NArg() > 0 {
		return usageError(std, fs.Name(), "takes no arguments")
	}
	st, closeVM, err := vf.newState(std, vmConfig{root: "."})
	if err != nil {
		return failState(std, fs.Name(), err)
	}
	repl := vm.NewREPL(st)
	repl.Globals()["help"] = newHelp(std.out)
	interactive := isTerminal(std.in) && isTerminal(std.out)
	var lines lineSource = pipedLines{bufio.NewReader(std.in)}
	if interactive {
		history := openHistory(historyFile())
		in := &lineReader{r: std.in}
		rl, err := newLineEditor(repl, in, std)
		if err != nil {
			closeVM()
			fmt.Fprintf(std.err, "skein repl: %v\n", err)
			return exitFailed
		}
		defer rl.Close()
		history.load(rl)
		lines = &editorLines{rl: rl, in: in, history: history}
		fmt.Fprintf(std.out, "skein %s (%s %s/%s): type :help for help, Ctrl-D to exit\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}

	intr := newInterrupter(interactive)
	defer intr.stop()
	intr.tracer = telemetry.FromEnv(std.err)
	defer intr.tracer.Close()
	failed := loop(repl, st, lines, intr, vf.timeout, &vf.store, std)
	if err := closeVM(); err != nil {
		fmt.Fprintf(std.err, "skein repl: %v\n", err)
		return exitFailed
	}
	if failed && !interactive {
		return exitFailed // piped input: a failed input fails the run, as with python -
	}
	return exitOK
}

// loop reads and evaluates inputs until the end of input or :quit.
// Errors are printed and the loop goes on; it reports whether any input
// failed.
func loop(repl *vm.REPL, st *vm.State, lines lineSource, intr *interrupter, timeout time.Duration, store *storeFlag, std stdio) (failed bool) {
	resumed := newResumeNotes(st.Clock())
	for {
		in, err := repl.Read(lines.line)
		lines.done(repl.LastSource())
		switch {
		case errors.Is(err, io.EOF):
			return
		case errors.Is(err, readline.ErrInterrupt):
			continue // Ctrl-C while typing drops the input
		case err != nil:
			fmt.Fprintln(std.err, vm.FormatError(err))
			failed = true
			continue
		}
		if in.Meta != "" {
			if quit := meta(in.Meta, st, std); quit {
				return
			}
			continue
		}
		if in.Empty() {
			continue
		}
		ctx, done := intr.begin(timeout)
		v, err := repl.Eval(ctx, in)
		done()
		resumed.check(std.err, st.Store.Live(), store.String())
		if err != nil {
			fmt.Fprintln(std.err, vm.FormatError(err))
			if h := store.hint(err); h != "" {
				fmt.Fprintln(std.err, h)
			}
			failed = true
			continue
		}
		if v != nil && v != starlark.None {
			fmt.Fprintln(std.out, v.String())
		}
	}
}

// meta runs a meta command and reports whether the REPL must exit.
func meta(line string, st *vm.State, std stdio) (quit bool) {
	cmd, args, _ := strings.Cut(line, " ")
	if cmd == ":export" {
		replExport(strings.Fields(args), st, std)
		return false
	}
	switch line {
	case ":help":
		fmt.Fprint(std.out, replHelp)
	case ":sessions":
		printSessions(std.out, st.Store.Live())
	case ":quit", ":q", ":exit":
		return true
	default:
		fmt.Fprintf(std.err, "skein repl: unknown command %s (type :help for the list)\n", line)
	}
	return false
}

// replExport implements :export NAME [ID] [--with-test].
func replExport(args []string, st *vm.State, std stdio) {
	const usage = "skein repl: usage: :export NAME [ID] [--with-test]"
	withTest := false
	var rest []string
	for _, a := range args {
		if a == "--with-test" {
			withTest = true
		} else {
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 || len(rest) > 2 {
		fmt.Fprintln(std.err, usage)
		return
	}
	var id string
	if len(rest) == 2 {
		id = rest[1]
	} else if live := st.Store.Live(); len(live) > 0 {
		id = live[0].ID
	} else {
		fmt.Fprintln(std.err, "skein repl: :export: no live session (open one, or name a stored one: :export NAME ID)")
		return
	}
	rec, err := st.Store.Snapshot(context.Background(), id)
	if err != nil {
		fmt.Fprintf(std.err, "skein repl: :export: %v\n", err)
		return
	}
	exportStar(std, "skein repl: :export", rec, rest[0]+".star", withTest)
}

// printSessions lists live sessions, most recently used first.
func printSessions(w io.Writer, list []sessions.Summary) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no live sessions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMESSAGES\tTURNS\tSTATUS")
	for _, s := range list {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", s.ID, s.Length, s.Turns, s.Status)
	}
	tw.Flush()
}

// interrupter turns SIGINT into the cancellation of the running input.
// On a terminal, Ctrl-C while typing reaches readline as a key instead
// (it drops the line). A second Ctrl-C while a cancelled input has still
// not stopped exits at once, and so does Ctrl-C while a piped REPL waits
// for input.
type interrupter struct {
	sigs        chan os.Signal
	quit        chan struct{}
	interactive bool
	tracer      *telemetry.Tracer // every input's spans (nil: none)

	mu      sync.Mutex
	cancel  context.CancelCauseFunc // of the running input; nil when idle
	pressed bool                    // the running input was interrupted
}

func newInterrupter(interactive bool) *interrupter {
	i := &interrupter{sigs: make(chan os.Signal, 1), quit: make(chan struct{}), interactive: interactive}
	signal.Notify(i.sigs, os.Interrupt)
	go i.watch()
	return i
}

func (i *interrupter) watch() {
	for {
		select {
		case <-i.quit:
			return
		case <-i.sigs:
		}
		i.mu.Lock()
		switch {
		case i.cancel != nil && !i.pressed:
			i.pressed = true
			i.cancel(errInterrupted)
		case i.cancel != nil || !i.interactive:
			os.Exit(130)
		}
		i.mu.Unlock()
	}
}

// begin returns the context of one input, cancelled by Ctrl-C and by the
// timeout, if any; done must be called when the input has finished.
func (i *interrupter) begin(timeout time.Duration) (ctx context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(telemetry.With(context.Background(), i.tracer))
	i.mu.Lock()
	i.cancel, i.pressed = cancel, false
	i.mu.Unlock()
	stopTimer := func() {}
	if timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timeout: the input exceeded --timeout %s", timeout))
		stopTimer = cancelTimeout
	}
	return ctx, func() {
		stopTimer()
		i.mu.Lock()
		i.cancel = nil
		i.mu.Unlock()
		cancel(nil)
	}
}

func (i *interrupter) stop() {
	signal.Stop(i.sigs)
	close(i.quit)
}

// isTerminal reports whether f is a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && readline.IsTerminal(int(file.Fd()))
}

// newLineEditor returns the readline instance of an interactive REPL
// reading in: completion from the REPL, multi-line history entries shown
// on one line (the history itself is replHistory's).
func newLineEditor(repl *vm.REPL, in *lineReader, std stdio) (*readline.Instance, error) {
	return readline.NewEx(&readline.Config{
		Stdin:                  readline.NewCancelableStdin(in),
		Prompt:                 primaryPrompt,
		HistoryLimit:           historyLimit,
		DisableAutoSaveHistory: true,
		HistorySearchFold:      true,
		AutoComplete:           completer{repl},
		Painter:                blockPainter{},
		Stdout:                 std.out.(*os.File),
		Stderr:                 std.err,
		InterruptPrompt:        "^C",
		EOFPrompt:              "\n",
	})
}

// completer adapts REPL.Complete (and the meta commands) to readline.
type completer struct{ repl *vm.REPL }

var _ readline.AutoCompleter = completer{}

// Do returns the suffixes completing the word before pos and the length
// of the part already typed.
func (c completer) Do(line []rune, pos int) ([][]rune, int) {
	before := string(line[:pos])
	var words []string
	var partial int
	if trimmed := strings.TrimLeft(before, " \t"); strings.HasPrefix(trimmed, ":") && !strings.ContainsAny(trimmed, " \t") {
		for _, m := range []string{":export", ":help", ":quit", ":sessions"} {
			if strings.HasPrefix(m, trimmed) {
				words = append(words, m)
			}
		}
		partial = len(trimmed)
	} else {
		words, partial = c.repl.Complete(before)
	}
	out := make([][]rune, len(words))
	for i, w := range words {
		out[i] = []rune(w[partial:])
	}
	return out, partial
}
