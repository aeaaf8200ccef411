package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
)

// sessionsMigrate implements `skein sessions migrate --from STORE --to
// STORE`: it copies every session (messages, events, history, lineage)
// and run record, and every repository record (skein serve's), of one
// store into another, typically a SQLite file into
// a PostgreSQL database, and checks the copy's counts.
func sessionsMigrate(args []string, std stdio) int {
	fs := newFlagSet("sessions migrate")
	from := &storeFlag{registered: true, durability: string(sessions.DurabilityProcess)}
	to := &storeFlag{registered: true, durability: string(sessions.DurabilityProcess)}
	fs.StringVar(&from.path, "from", defaultStore, "the store to copy: an SQLite file or a postgres:// URL")
	fs.StringVar(&to.path, "to", "", "the store to copy into (required): a postgres:// URL or an SQLite file, created if missing; it must hold nothing unless --merge")
	merge := fs.Bool("merge", false, "copy into a store that already holds sessions or runs (an id both hold is still refused, before anything is copied)")
	if code, stop := parseFlags(fs, usageOf(fs.Name()), args, std); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(std, fs.Name(), fmt.Sprintf("takes no arguments, got %q", fs.Arg(0)))
	}
	switch {
	case to.path == "":
		return usageError(std, fs.Name(), "--to must name the store to copy into")
	case from.path == storeMemory || to.path == storeMemory:
		return usageError(std, fs.Name(), "--store memory holds no stored sessions: name a database file or URL")
	case from.path == to.path:
		return usageError(std, fs.Name(), "--from and --to name the same store")
	}
	if !from.postgres() && !storeExists(from) {
		return fail(std, fs.Name(), fmt.Errorf("no session store at %s: nothing to migrate", from))
	}
	src, err := storedBackend(from, storeRead)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer src.Close()
	dst, err := storedBackend(to, storeWrite)
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	defer dst.Close()
	stats, err := sessions.Copy(context.Background(), src, dst, sessions.CopyOptions{Merge: *merge})
	if errors.Is(err, sessions.ErrNotEmpty) {
		err = fmt.Errorf("%s: %w (pass --merge to copy into it anyway)", to, err)
	}
	if err != nil {
		return fail(std, fs.Name(), fmt.Errorf("%w (%s copied before the error)", err, copied(stats)))
	}
	fmt.Fprintf(std.out, "migrated %s from %s to %s; every count checked\n", copied(stats), from, to)
	return exitOK
}

// copied says what a migration copied.
func copied(s sessions.CopyStats) string {
	return fmt.Sprintf("%s (%s, %s, %s of history), %s (%s) and %s", plural(s.Sessions, "session"), plural(s.Messages, "message"),
		plural(s.Events, "event"), plural(s.History, "message"), plural(s.Runs, "run"), plural(s.RunSteps, "step"),
		plural(s.Repos, "repository record"))
}
