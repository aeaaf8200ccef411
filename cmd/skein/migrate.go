package main

import (
	"context"
	"fmt"

	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/sqlite"
)

const migrateUsage = "[--store PATH|URL]"

// migrateCommand implements `skein migrate`: it creates the session
// store's schema or upgrades it to this skein's version. It is the only
// command that changes a schema; the others check the version and, when
// it is behind, say to run it (a new SQLite file is still created by the
// first command that stores a session).
func migrateCommand(args []string, std stdio) int {
	fs := newFlagSet("migrate")
	store := &storeFlag{}
	store.register(fs)
	if code, stop := parseFlags(fs, migrateUsage, args, std); stop {
		return code
	}
	if err := store.check(); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	switch {
	case fs.NArg() > 0:
		return usageError(std, fs.Name(), fmt.Sprintf("takes no arguments, got %q (the store is given with --store)", fs.Arg(0)))
	case store.memory():
		return usageError(std, fs.Name(), "--store memory has no schema: name a database file or a postgres:// URL")
	}
	var from, to int
	var err error
	if store.postgres() {
		from, err = postgres.Migrate(context.Background(), store.path)
		to = postgres.SchemaVersion
	} else {
		from, err = sqlite.Migrate(store.path)
		to = sqlite.SchemaVersion
	}
	if err != nil {
		return fail(std, fs.Name(), err)
	}
	switch {
	case from == to:
		fmt.Fprintf(std.out, "skein migrate: %s is at schema version %d already: nothing to do\n", store, to)
	case from == 0:
		fmt.Fprintf(std.out, "skein migrate: %s: created skein's tables (schema version %d)\n", store, to)
	default:
		fmt.Fprintf(std.out, "skein migrate: %s: upgraded from schema version %d to %d\n", store, from, to)
	}
	return exitOK
}
