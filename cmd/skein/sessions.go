package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/skein-dev/skein/sessions"
)

const sessionsUsage = "<command> [flags] [arguments]"

// sessionsCommand is one subcommand of `skein sessions`.
type sessionsCommand struct {
	name, usage, summary string
	run                  func(args []string, std stdio) int
}

func sessionsCommands() []sessionsCommand {
	return []sessionsCommand{
		{"ls", "[flags]", "list stored sessions, newest first", sessionsLs},
		{"show", "[flags] ID", "print a session's transcript (and tool calls, events)", sessionsShow},
		{"export", "[flags] ID", "write a session as a JSONL event log or a JSON snapshot", sessionsExport},
		{"import", "[flags] FILE", "store a session from an export (- reads stdin)", sessionsImport},
		{"rm", "[flags] ID...", "delete sessions", sessionsRm},
		{"gc", "--older-than DURATION [flags]", "delete sessions not updated for a while", sessionsGC},
		{"migrate", "--to STORE [--from STORE] [--merge]", "copy every session and run record into another store (SQLite to PostgreSQL)", sessionsMigrate},
	}
}

// sessionsMain implements `skein sessions <command>`: the stored sessions
// of a database, outside any pipeline.
func sessionsMain(args []string, std stdio) int {
	return dispatch(args, std, "skein sessions", sessionsUsage, sessionsCommands(),
		"Every command but migrate (--from, --to) takes --store (default $SKEIN_STORE, else\n.skein/sessions.db, or a postgres:// URL); ls, show and export open a file read-only,\nso they also work on a read-only file or directory.\n"+
			"Run 'skein sessions <command> -h' for a command's flags.")
}

// dispatch runs the subcommand of group (skein sessions, skein runs)
// that args name, or prints the group's help (usage, the commands and
// note) for -h.
func dispatch(args []string, std stdio, group, usage string, cmds []sessionsCommand, note string) int {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	if len(args) == 0 {
		return usageError(std, group, "missing command (one of: "+strings.Join(names, ", ")+")")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintf(std.out, "Usage: %s %s\n\nCommands:\n", group, usage)
		for _, c := range cmds {
			fmt.Fprintf(std.out, "  %-7s %s\n", c.name, c.summary)
		}
		fmt.Fprintln(std.out, "\n"+note)
		return exitOK
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.run(args[1:], std)
		}
	}
	return usageError(std, group, fmt.Sprintf("unknown command '%s' (one of: %s)", sessions.Escape(args[0]), strings.Join(names, ", ")))
}

// sessionsFlags returns the flag set of a sessions subcommand, with its
// --store flag.
func sessionsFlags(name string, store *storeFlag) *flag.FlagSet {
	fs := newFlagSet("sessions " + name)
	store.register(fs)
	return fs
}

// usageOf returns the usage line of a sessions or runs subcommand, by its
// flag set's name ("skein sessions ls").
func usageOf(name string) string {
	for prefix, commands := range map[string][]sessionsCommand{"skein sessions ": sessionsCommands(), "skein runs ": runsCommands()} {
		for _, c := range commands {
			if prefix+c.name == name {
				return c.usage
			}
		}
	}
	return ""
}

// parseInterleaved parses args like parseFlags but also accepts flags
// after the positional arguments (`rm ID --recursive`), which it
// returns. "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string, std stdio) ([]string, int, bool) {
	var positional []string
	for {
		if code, stop := parseFlags(fs, usageOf(fs.Name()), args, std); stop {
			return nil, code, true
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, 0, false
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(positional, rest...), 0, false
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// How a sessions or runs subcommand opens the database (storedBackend).
type storeAccess int

const (
	storeRead  storeAccess = iota // read-only: ls, show, export, runs
	storeWrite                    // rm, gc, import
)

// storedBackend opens the sessions database of a sessions subcommand. A
// database that does not exist reads as an empty store, and only a
// write (import) creates it. storeRead opens an existing file read-only,
// so a read-only file or directory can be listed, shown and exported.
// --store memory is a usage error: it holds no stored sessions.
func storedBackend(store *storeFlag, access storeAccess) (sessions.Backend, error) {
	if store.memory() {
		return nil, errUsage("--store memory holds no stored sessions: name a database file")
	}
	if store.path == "" {
		return nil, errUsage(`--store must name a database file`)
	}
	if err := store.check(); err != nil {
		return nil, errUsage(err.Error())
	}
	if access == storeRead && storeExists(store) {
		return store.openReadOnly()
	}
	return store.openNow()
}

// storeExists reports whether the database file of store exists (a
// PostgreSQL database does: its tables are made when it is opened).
func storeExists(store *storeFlag) bool {
	if store.postgres() {
		return true
	}
	_, err := os.Stat(store.path)
	return err == nil
}

// errUsage is an error that a sessions subcommand reports as a usage
// error (exit 2).
type errUsage string

func (e errUsage) Error() string { return string(e) }

// fail reports err for command cmd on one line and returns its exit code:
// 2 for an errUsage, 1 for the others.
func fail(std stdio, cmd string, err error) int {
	var ue errUsage
	if errors.As(err, &ue) {
		return usageError(std, cmd, ue.Error())
	}
	fmt.Fprintf(std.err, "%s: %s\n", cmd, oneLine(err.Error()))
	return exitFailed
}

// oneLine keeps an error message on one line.
func oneLine(s string) string {
	return printable(strings.Join(strings.Fields(s), " "))
}

// sessionError words a backend error about session id for the CLI.
func sessionError(store *storeFlag, id string, err error) error {
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		return fmt.Errorf("unknown session id '%s' in %s", id, store)
	case errors.Is(err, sessions.ErrExists):
		return fmt.Errorf("session '%s' already exists in %s", id, store)
	}
	return err
}

// cycleHint says how to remove a parent cycle stored by an older
// version, which lineage walks refuse (sessions.ErrCycle).
func cycleHint(err error) error {
	if errors.Is(err, sessions.ErrCycle) {
		return fmt.Errorf("%w (stored by an older version: skein sessions rm ID --recursive removes the whole cycle)", err)
	}
	return err
}

// parseStatuses parses a comma-separated list of statuses.
func parseStatuses(flagName, s string) ([]sessions.Status, error) {
	if s == "" {
		return nil, nil
	}
	var out []sessions.Status
	for _, part := range strings.Split(s, ",") {
		st := sessions.Status(strings.TrimSpace(part))
		if !st.Valid() {
			names := make([]string, len(sessions.Statuses))
			for i, x := range sessions.Statuses {
				names[i] = string(x)
			}
			return nil, errUsage(fmt.Sprintf("--%s: unknown status '%s' (expected one of: %s)", flagName, sessions.Escape(string(st)), strings.Join(names, ", ")))
		}
		out = append(out, st)
	}
	return out, nil
}

// parseOne is parseInterleaved for a command that takes exactly one
// argument, what (for the usage errors: "session ID", "RUN_ID").
func parseOne(fs *flag.FlagSet, args []string, what string, std stdio) (string, int, bool) {
	rest, code, stop := parseInterleaved(fs, args, std)
	switch {
	case stop:
		return "", code, true
	case len(rest) == 0:
		return "", usageError(std, fs.Name(), "missing "+what), true
	case len(rest) > 1:
		return "", usageError(std, fs.Name(), fmt.Sprintf("takes one %s, got %d", what, len(rest))), true
	}
	return rest[0], 0, false
}
