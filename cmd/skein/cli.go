package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/skein-dev/skein/internal/didyoumean"
	"github.com/skein-dev/skein/sessions"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Exit codes.
const (
	exitOK     = 0 // success
	exitFailed = 1 // a script error or failing tests
	exitUsage  = 2 // bad flags, arguments or files
)

// stdio is the process's standard streams (replaced in tests).
type stdio struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// command is one subcommand of the CLI.
type command struct {
	name    string
	usage   string // argument synopsis after "skein <name>"
	summary string
	run     func(args []string, std stdio) int
}

func commands() map[string]command {
	list := []command{
		{"run", "[flags] FILE [ARGS...]", "run a Starlark pipeline", runCommand},
		{"repl", replUsage, "start an interactive Starlark session", replCommand},
		{"test", testUsage, "run the test_* functions of *_test.star files", testCommand},
		{"acp", acpUsage, "be an Agent Client Protocol agent on stdio, for editors", acpCommand},
		{"mcp", mcpUsage, "serve a script's documented functions as Model Context Protocol tools (stdio or HTTP)", mcpCommand},
		{"eval", evalUsage, "evaluate a task over a dataset: variants, repeats, scorers, a stored run compared with the last", evalCommand},
		{"migrate", migrateUsage, "create or upgrade a session store's schema (the only command that changes it)", migrateCommand},
		{"serve", serveUsage, "serve the session API over HTTP, with live events and a transcript viewer", serveCommand},
		{"sessions", sessionsUsage, "list, show, export, import and delete stored sessions", sessionsMain},
		{"runs", runsUsage, "list and show workflow run records", runsMain},
		{"version", "", "print skein's version", versionCommand},
	}
	m := map[string]command{}
	for _, c := range list {
		m[c.name] = c
	}
	return m
}

// skein is the CLI's entry point; it returns the exit code.
func skein(args []string, std stdio) int {
	if len(args) == 0 {
		printUsage(std.err)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			if c, ok := commands()[rest[0]]; ok {
				return c.run([]string{"-h"}, std)
			}
			fmt.Fprintf(std.err, "skein help: unknown command '%s'\n", sessions.Escape(rest[0]))
			return exitUsage
		}
		printUsage(std.out)
		return exitOK
	}
	c, ok := commands()[name]
	if !ok {
		fmt.Fprintf(std.err, "skein: unknown command '%s' (run 'skein help' for the list)\n", sessions.Escape(name))
		return exitUsage
	}
	return c.run(rest, std)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "skein runs Starlark pipelines of LLM agents.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: skein <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'skein help <command>' or 'skein <command> -h' for a command's flags.")
}

// newFlagSet returns a flag set for a command that reports errors itself.
func newFlagSet(c string) *flag.FlagSet {
	fs := flag.NewFlagSet("skein "+c, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args into fs. It returns (code, true) when the
// command must stop: after -h (usage printed, exit 0) or a bad flag (one
// line on stderr, exit 2).
func parseFlags(fs *flag.FlagSet, usage string, args []string, std stdio) (int, bool) {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(std.out, "Usage: %s %s\n\nFlags:\n", fs.Name(), usage)
		fs.SetOutput(std.out)
		fs.PrintDefaults()
		return exitOK, true
	}
	if err != nil {
		return usageError(std, fs.Name(), flagMessage(fs, err)), true
	}
	return 0, false
}

// badDuration matches flag's error for a value a duration flag refused
// (compiled on first use: nothing is built at start-up).
var badDuration = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^invalid value "([^"]*)" for flag -+([\w-]+): parse error$`)
})

// flagMessage is a flag error's message: flag's, with " (did you mean
// --x?)" for an undefined flag near a defined one, and a duration flag
// given a bare number says so instead of "parse error" ("--timeout 5":
// did you mean 5s?).
func flagMessage(fs *flag.FlagSet, err error) string {
	if m := badDuration().FindStringSubmatch(err.Error()); m != nil {
		var g flag.Getter
		ok := false
		if f := fs.Lookup(m[2]); f != nil {
			g, ok = f.Value.(flag.Getter)
		}
		if _, nerr := strconv.ParseFloat(m[1], 64); ok && nerr == nil && isDuration(g.Get()) {
			return fmt.Sprintf("invalid value %q for flag -%s: a duration needs a unit (did you mean %ss?)", m[1], m[2], m[1])
		}
	}
	return err.Error() + flagHint(fs, err)
}

// flagHint is " (did you mean --x?)" for an undefined flag near a defined
// one, else "".
func flagHint(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if near := didyoumean.Closest(strings.TrimPrefix(name, "-"), names); near != "" {
		return fmt.Sprintf(" (did you mean --%s?)", near)
	}
	return ""
}

// usageError prints a one-line usage error and returns exitUsage.
func usageError(std stdio, cmd, msg string) int {
	fmt.Fprintf(std.err, "%s: %s (see '%s -h')\n", cmd, printable(strings.TrimSpace(msg)), cmd)
	return exitUsage
}

func isDuration(v any) bool {
	_, ok := v.(time.Duration)
	return ok
}
