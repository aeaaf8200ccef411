package main

import (
	"context"
	"fmt"

	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/sessions/storekey"
)

const migrateUsage = "[--store PATH|URL] [--rotate-key NEW_KEY_FILE]"

// migrateCommand implements `skein migrate`: it creates the session
// store's schema or upgrades it to this skein's version. It is the only
// command that changes a schema; the others check the version and, when
// it is behind, say to run it (a new SQLite file is still created by the
// first command that stores a session).
func migrateCommand(args []string, std stdio) int {
	fs := newFlagSet("migrate")
	store := &storeFlag{}
	store.register(fs)
	var rotate string
	registerFlags(fs, []flagDef{{name: "rotate-key", value: &rotate,
		usage: "after migrating, seal every stored payload anew with the key in this file, opening each with the current key (--encryption-key-file or SKEIN_STORE_KEY_FILE; none for a store written without one), in one transaction"}})
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
	key, err := store.storeKey()
	if err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	var from, to int
	if store.postgres() {
		notice := func(s string) { fmt.Fprintf(std.err, "skein migrate: note: %s\n", s) }
		from, err = postgres.Migrate(context.Background(), store.path, postgres.WithKey(key), postgres.WithNotice(notice))
		to = postgres.SchemaVersion
	} else {
		from, err = sqlite.Migrate(store.path, sqlite.WithKey(key))
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
	if rotate != "" {
		return rotateKey(store, rotate, std)
	}
	return exitOK
}

// rotateKey implements --rotate-key: every payload of the store is
// sealed anew with the key in the file newKey.
func rotateKey(store *storeFlag, newKey string, std stdio) int {
	const name = "migrate"
	to, err := storekey.Load(newKey)
	if err != nil {
		return usageError(std, name, fmt.Sprintf("--rotate-key: %v", err))
	}
	from, err := store.storeKey()
	if err != nil {
		return usageError(std, name, err.Error())
	}
	var r storekey.Rotation
	if store.postgres() {
		r, err = postgres.RotateKey(context.Background(), store.path, from, to)
	} else {
		r, err = sqlite.RotateKey(context.Background(), store.path, from, to)
	}
	if err != nil {
		return fail(std, name, err)
	}
	fmt.Fprintf(std.out, "skein migrate: %s: sealed %d sessions, %d messages, %d events and %d workflow runs with key %s; use that key file from now on\n",
		store, r.Sessions, r.Messages, r.Events, r.Runs, to.ID())
	return exitOK
}
