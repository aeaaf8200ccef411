package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/storekey"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// BusyTimeout is how long a write waits for another process's write
// transaction to finish before it fails.
const BusyTimeout = 5 * time.Second

// Backend is a sessions.Backend over one SQLite file. It is safe for
// concurrent use, and several Backends (in one process or several) may
// share one file.
type Backend struct {
	db         *sql.DB
	path       string
	durability sessions.Durability
	readOnly   bool
	migrating  bool // Migrate: an older schema is upgraded, not refused
	stmts      statements
	// wmu serialises this Backend's write transactions, so they queue in
	// Go rather than poll SQLite's lock. Other Backends and processes on
	// the same file wait for the lock through busy_timeout.
	wmu   sync.Mutex
	known knownStates // guarded by wmu
	wconn *writeConn  // guarded by wmu; nil until writeKnown needs it
	// carry is the statements waiting for a write to carry them
	// (carry.go), guarded by cmu.
	cmu   sync.Mutex
	carry []*carried
	ckpt  checkpointer
	// key seals the payloads this Backend writes and opens sealed ones
	// (WithKey); nil writes them plain, with checksums.
	key *storekey.Key
}

var (
	_ sessions.Backend        = (*Backend)(nil)
	_ sessions.PartialLoader  = (*Backend)(nil)
	_ sessions.HistoryBackend = (*Backend)(nil)
)

// Option configures Open.
type Option func(*Backend)

// WithDurability sets what commits survive (default
// sessions.DurabilityProcess): SQLite's synchronous=NORMAL for
// DurabilityProcess, synchronous=FULL (an fsync per commit) for
// DurabilityFull. See the package doc.
func WithDurability(d sessions.Durability) Option {
	return func(b *Backend) { b.durability = d }
}

// WithKey seals every payload the Backend writes (message bodies, event
// data, titles, summaries, first prompts, metadata) with k (see package
// storekey and the package doc's "Encryption at rest") and opens sealed
// payloads with it. Without it payloads are written plain, with
// checksums, and reading a sealed one fails with storekey.ErrNoKey.
func WithKey(k *storekey.Key) Option {
	return func(b *Backend) { b.key = k }
}

// Open opens the session database at path, creating its directory (mode
// 0700) and the file (mode 0600), with the tables of SchemaVersion, when
// they are missing. It fails for a file that is not a skein session
// database, whose schema is newer than this package knows, or whose
// schema is older: that error wraps ErrNeedsMigration, and Migrate (skein
// migrate) upgrades the file.
func Open(path string, opts ...Option) (*Backend, error) {
	b, synchronous, err := configure(path, opts)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if b.readOnly {
		return openReadOnly(b, abs)
	}
	if err := create(abs); err != nil {
		return nil, fmt.Errorf("sqlite: %w", readOnlyCause(abs, err))
	}
	db, err := sql.Open("sqlite", dsn(abs, synchronous))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	// database/sql keeps 2 idle connections by default: with more reads
	// at once (a server's turns and streams), every read past them would
	// open a connection (its pragmas) and prepare its statements anew,
	// then close it.
	db.SetMaxIdleConns(maxIdleConns)
	b.db, b.path = db, abs
	if err := b.init(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", abs, readOnlyCause(abs, err))
	}
	return b, nil
}

// Migrate creates the session database at path (as Open does) or
// upgrades its schema to SchemaVersion, keeping every session, and
// returns the version it was at (0: a new file). It is the only way to
// upgrade a file of an older schema: Open refuses one (ErrNeedsMigration).
func Migrate(path string, opts ...Option) (from int, err error) {
	b, synchronous, err := configure(path, opts)
	if err != nil {
		return 0, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, fmt.Errorf("sqlite: %w", err)
	}
	if err := create(abs); err != nil {
		return 0, fmt.Errorf("sqlite: %w", readOnlyCause(abs, err))
	}
	db, err := sql.Open("sqlite", dsn(abs, synchronous))
	if err != nil {
		return 0, fmt.Errorf("sqlite: open %s: %w", abs, err)
	}
	b.db, b.path, b.migrating = db, abs, true
	err = b.read(context.Background(), func(tx *sql.Tx) error {
		from, err = checkSchema(context.Background(), tx)
		return err
	})
	if err == nil {
		err = b.init(context.Background())
	}
	if err != nil {
		db.Close()
		return 0, fmt.Errorf("sqlite: migrate %s: %w", abs, readOnlyCause(abs, err))
	}
	return from, b.Close()
}

// create creates the database file at path (mode 0600) and its directory
// (0700) unless they exist.
func create(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		return f.Close()
	case errors.Is(err, fs.ErrExist):
		return nil
	}
	return err
}

// maxIdleConns is how many idle connections the Backend keeps open.
const maxIdleConns = 16

// configure checks path and applies opts to an unopened Backend,
// returning it and its PRAGMA synchronous.
func configure(path string, opts []Option) (*Backend, string, error) {
	if path == "" {
		return nil, "", errors.New("sqlite: empty database path")
	}
	b := &Backend{durability: sessions.DurabilityProcess}
	for _, o := range opts {
		o(b)
	}
	synchronous, ok := synchronousOf(b.durability)
	if !ok {
		_, err := sessions.ParseDurability(string(b.durability))
		return nil, "", fmt.Errorf("sqlite: %w", err)
	}
	return b, synchronous, nil
}

// dsn is the driver's name for the database at path: a file: URI whose
// parameters configure every connection the pool opens. Write
// transactions begin IMMEDIATE (taking the write lock before they read,
// so a version check cannot go stale before the write) and read-only ones
// DEFERRED. synchronous is the connections' PRAGMA synchronous. No
// connection checkpoints in its commits: the Backend does, on a goroutine
// (see checkpoint.go).
func dsn(path, synchronous string) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), OmitHost: true}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+synchronous+")")
	q.Add("_pragma", "wal_autocheckpoint(0)") // see checkpoint.go
	q.Set("_txlock", "immediate")
	u.RawQuery = q.Encode()
	return u.String()
}

// readOnlyDSN is dsn for a read-only connection; immutable also tells
// SQLite that nothing can change the file (see openReadOnly).
func readOnlyDSN(path string, immutable bool) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path), OmitHost: true}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Set("mode", "ro")
	if immutable {
		q.Set("immutable", "1")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// synchronousOf is SQLite's PRAGMA synchronous for each durability level.
// In WAL mode NORMAL syncs the log only at checkpoints: a commit is in the
// log file, so in the operating system's page cache, when it returns,
// which a process crash cannot lose. FULL syncs the log at every commit.
// ok is false for an unknown level. (A switch: a map literal would be
// built at every start.)
func synchronousOf(d sessions.Durability) (pragma string, ok bool) {
	switch d {
	case sessions.DurabilityProcess:
		return "NORMAL", true
	case sessions.DurabilityFull:
		return "FULL", true
	}
	return "", false
}

// Durability returns the backend's durability level.
func (b *Backend) Durability() sessions.Durability { return b.durability }

// pageSize is the page size of new databases (a file keeps the one it
// was made with). It was chosen for schema 8, whose tables stored a 1 KB
// message in 1.19 KB with 8 KiB pages against 1.38 KB with SQLite's
// default 4 KiB (BenchmarkDiskPerMessage). With one row per write
// (schema 9) the two take the same space (999 and 1,008 bytes) and the
// same time per write (BenchmarkW1 and BenchmarkW2, three interleaved
// runs each), so files keep 8 KiB.
const pageSize = 8192

func (b *Backend) init(ctx context.Context) error {
	// Refuse another application's file before changing anything in it.
	// Its header and schema are read in one transaction: another process
	// may be migrating the file right now. A new, empty file gets the
	// tables; an older schema only through Migrate.
	if err := b.read(ctx, func(tx *sql.Tx) error {
		version, err := checkSchema(ctx, tx)
		if err == nil && version > 0 && version < SchemaVersion && !b.migrating {
			err = &needsMigration{path: b.path, version: version}
		}
		return err
	}); err != nil {
		return err
	}
	// page_size only takes effect on a database that has no tables yet.
	if _, err := b.db.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d", pageSize)); err != nil {
		return err
	}
	if err := walMode(ctx, b.db); err != nil {
		return err
	}
	if err := migrate(ctx, b.db, b.key); err != nil {
		return err
	}
	return b.prepare(ctx)
}

// walMode puts the database in WAL mode (a no-op when it is already).
// Switching a new file needs it to itself, and SQLite refuses the switch
// with SQLITE_BUSY at once, without waiting on busy_timeout, while
// another process opening the same new file holds a lock: so it retries,
// for up to BusyTimeout.
func walMode(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(BusyTimeout)
	for {
		var mode string
		err := db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
		switch {
		case err == nil && mode != "wal":
			return fmt.Errorf("cannot use WAL mode (journal_mode is %s)", mode)
		case err == nil:
			return nil
		case !isBusy(err) || time.Now().After(deadline):
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	const sqliteBusy = 5
	return resultCode(err) == sqliteBusy
}

// resultCode is SQLite's primary result code of err, or -1 when err is
// not SQLite's.
func resultCode(err error) int {
	var coded interface{ Code() int }
	if !errors.As(err, &coded) {
		return -1
	}
	return coded.Code() & 0xff
}

// Path returns the database file's absolute path.
func (b *Backend) Path() string { return b.path }

// Durable reports true: sessions outlive the process.
func (b *Backend) Durable() bool { return true }

// Close closes the database. Calling it again does nothing.
func (b *Backend) Close() error {
	if b.db == nil {
		return nil
	}
	b.stopCheckpoints()
	b.wmu.Lock()
	var err error
	if b.wconn != nil {
		err, b.wconn = b.wconn.close(false), nil
	}
	b.wmu.Unlock()
	err = errors.Join(err, b.stmts.close())
	return errors.Join(err, b.db.Close())
}

// write runs fn in a write transaction and commits it if fn succeeds.
//
// A cancelled ctx stops a write before it begins; once begun, a write
// runs to its commit or rollback with ctx's values but without its
// cancellation. A write is short (the wait for another process's lock
// is bounded by BusyTimeout), and the driver watches every statement
// run under a cancellable context with a goroutine of its own, which
// cost more than the statements themselves.
func (b *Backend) write(ctx context.Context, fn func(*sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	b.wmu.Lock()
	defer b.wmu.Unlock()
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	b.begun()
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		// fn may have recorded the state its write would have left: none
		// of that write happened, and another writer may bring a session
		// to the version recorded in another state.
		b.known = knownStates{}
		return err
	}
	b.committed(ctx)
	return nil
}

// read runs fn in a read transaction: every query of fn sees the same
// committed state.
func (b *Backend) read(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(tx)
}
