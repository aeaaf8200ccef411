package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/sqlite"
	"github.com/skein-dev/skein/sessions/storekey"
)

// defaultStore is where run and repl keep sessions unless --store or
// SKEIN_STORE says otherwise: relative to the working directory.
const defaultStore = ".skein/sessions.db"

// storeMemory is the --store value of an ephemeral in-memory store.
const storeMemory = "memory"

// storeFlag is the --store flag: the session database of a command whose
// sessions outlive it, or "memory". Unregistered, it means memory.
type storeFlag struct {
	path       string
	durability string
	// keyFile is --encryption-key-file: the store key's file, "" for none
	// (a store flag that is not registered reads SKEIN_STORE_KEY_FILE).
	keyFile    string
	keyFlag    bool // keyFile is a registered flag
	registered bool
	envErr     error // see registerFlags
	key        *storekey.Key
	keyErr     error
	keyLoaded  bool
}

// register adds --store and --durability to fs.
func (f *storeFlag) register(fs *flag.FlagSet) {
	f.registered = true
	f.envErr = registerFlags(fs, f.flags())
}

// storeKeyEnv is the environment variable naming the store key's file.
const storeKeyEnv = "SKEIN_STORE_KEY_FILE"

// keyFlagDef is the --encryption-key-file row of a command's flag table.
func (f *storeFlag) keyFlagDef() flagDef {
	f.keyFlag = true
	return flagDef{name: "encryption-key-file", value: &f.keyFile, env: storeKeyEnv,
		usage: "seal the payloads of the stored sessions (messages, events, titles, summaries, metadata) with the AES-256 key in this file (32 random bytes, base64; mode 0600), and open them with it; see docs/security.md"}
}

// flags is the table of --store, --durability and --encryption-key-file.
func (f *storeFlag) flags() []flagDef {
	return []flagDef{
		f.keyFlagDef(),
		{name: "store", value: &f.path, def: defaultStore, env: "SKEIN_STORE",
			usage: "session database: an SQLite file, created by the first session stored, a postgres:// URL (PostgreSQL, shared by processes on any machine), or \"memory\" for sessions that end with the process"},
		{name: "durability", value: &f.durability, def: string(sessions.DurabilityProcess), env: "SKEIN_DURABILITY",
			usage: "what a stored session's commits survive: \"process\" (a crash of skein) or \"full\" (also a power cut: an fsync per commit)"},
	}
}

// check validates the flag's value, returning a usage message.
func (f *storeFlag) check() error {
	if !f.registered {
		return nil
	}
	if f.envErr != nil {
		return f.envErr
	}
	if f.path == "" {
		return errors.New("--store must name a database file or URL, or be \"memory\"")
	}
	if _, err := sessions.ParseDurability(f.durability); err != nil {
		return fmt.Errorf("--durability: %v", err)
	}
	if _, err := f.storeKey(); err != nil {
		return err
	}
	return nil
}

// storeKey returns the store key (nil: none), loading its file once.
func (f *storeFlag) storeKey() (*storekey.Key, error) {
	if f.keyLoaded {
		return f.key, f.keyErr
	}
	f.keyLoaded = true
	path := f.keyFile
	if !f.keyFlag {
		path = os.Getenv(storeKeyEnv)
	}
	if path == "" {
		return nil, nil
	}
	if f.key, f.keyErr = storekey.Load(path); f.keyErr != nil {
		f.keyErr = fmt.Errorf("--encryption-key-file: %v", f.keyErr)
	}
	return f.key, f.keyErr
}

// memory reports whether the store is the in-memory one.
func (f *storeFlag) memory() bool { return !f.registered || f.path == storeMemory }

// postgres reports whether the store is a PostgreSQL database.
func (f *storeFlag) postgres() bool { return !f.memory() && postgres.IsDSN(f.path) }

// String is the store as messages name it: a PostgreSQL URL without its
// password (postgres.Redact), which skein never prints.
func (f *storeFlag) String() string {
	if f.postgres() {
		return postgres.Redact(f.path)
	}
	return f.path
}

// openPostgres connects to the PostgreSQL database of the store (it
// creates skein's tables there if they are missing).
func (f *storeFlag) openPostgres(d sessions.Durability) (sessions.Backend, error) {
	k, err := f.storeKey()
	if err != nil {
		return nil, &storeError{err}
	}
	b, err := postgres.Open(context.Background(), f.path, postgres.WithDurability(d), postgres.WithKey(k))
	if err != nil {
		return nil, &storeError{err}
	}
	return b, nil
}

// open returns the store's backend: the in-memory one, the PostgreSQL
// database, or the SQLite file opened lazily (sqlite.Lazy): the file and
// its directory are made by the first write, so a run that stores
// nothing leaves none behind, and until then reads answer as an empty
// store.
func (f *storeFlag) open() (sessions.Backend, error) {
	if f.memory() {
		return sessions.NewMemoryBackend(), nil
	}
	d, err := sessions.ParseDurability(f.durability)
	if err != nil {
		return nil, err
	}
	if f.postgres() {
		return f.openPostgres(d)
	}
	k, err := f.storeKey()
	if err != nil {
		return nil, &storeError{err}
	}
	b, err := sqlite.OpenLazy(f.path, sqlite.WithDurability(d), sqlite.WithKey(k))
	if err != nil {
		return nil, &storeError{err}
	}
	return b, nil
}

// openReadOnly opens the store's existing database for reading only
// (see sqlite.ReadOnly); a database of an older schema is opened for
// writing once, to migrate it. A PostgreSQL store is opened as usual:
// the server's permissions say what a role may do.
func (f *storeFlag) openReadOnly() (sessions.Backend, error) {
	if f.postgres() {
		return f.openNow()
	}
	k, err := f.storeKey()
	if err != nil {
		return nil, &storeError{err}
	}
	b, err := sqlite.Open(f.path, sqlite.ReadOnly(), sqlite.WithKey(k))
	if errors.Is(err, sqlite.ErrNeedsMigration) {
		return f.openNow()
	}
	if err != nil {
		return nil, &storeError{err}
	}
	return b, nil
}

// openNow is open that opens an existing file at once, so that a file
// that is not a session database is reported before any work starts
// (the sessions commands, serve). It creates nothing.
func (f *storeFlag) openNow() (sessions.Backend, error) {
	b, err := f.open()
	if err != nil {
		return nil, err
	}
	if l, ok := b.(*sqlite.Lazy); ok {
		if err := l.OpenExisting(); err != nil {
			l.Close()
			return nil, &storeError{err}
		}
	}
	return b, nil
}

// storeError is a failure to open the session store: a command reports
// it as a failure (exit 1), not a usage error (see failState).
type storeError struct{ err error }

func (e *storeError) Error() string {
	return fmt.Sprintf("cannot open the session store: %v (--store names another, --store memory runs without one)", e.err)
}

func (e *storeError) Unwrap() error { return e.err }

// failState reports an error of vmFlags.newState for command cmd on one
// line and returns the exit code: 1 when the session store cannot be
// opened, 2 for the others (flag values and files, usage errors).
func failState(std stdio, cmd string, err error) int {
	var se *storeError
	if errors.As(err, &se) {
		fmt.Fprintf(std.err, "%s: %v\n", cmd, err)
		return exitFailed
	}
	return usageError(std, cmd, err.Error())
}

// hint returns advice for a script error caused by the durable store, or
// "": a store file that cannot be opened (found at the first call that
// needed it), or a session that "already exists", most often one an
// earlier run stored under a fixed id.
func (f *storeFlag) hint(err error) string {
	if f.memory() {
		return ""
	}
	var oe *sqlite.OpenError
	if errors.As(err, &oe) {
		return fmt.Sprintf("hint: the session store %s cannot be opened: --store names another, --store memory runs without one", f)
	}
	var se *sessions.Error
	if !errors.As(err, &se) || !errors.Is(se.Err, sessions.ErrExists) {
		return ""
	}
	rm := "skein sessions rm " + se.ID
	if f.path != defaultStore {
		rm = fmt.Sprintf("skein sessions rm --store %s %s", f, se.ID)
	}
	return fmt.Sprintf("hint: session '%s' is stored in %s, perhaps by an earlier run: remove it with `%s`, pick another id (None mints a new one), or run with --store memory", se.ID, f, rm)
}
