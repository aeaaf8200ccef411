package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/storekey"
)

// Backend is a sessions.Backend over one PostgreSQL database (the tables
// of one schema). It is safe for concurrent use, and any number of
// Backends, in any number of processes on any number of machines, may
// share the database.
type Backend struct {
	pool       *pgxpool.Pool
	dsn        string // redacted
	schema     string // the schema of skein's tables
	durability sessions.Durability
	maxConns   int32
	states     stateCache
	// lockRecords are the locks of its Lockers that its writes record
	// (see NewLocker).
	lockRecords lockRecords
	// listeners are the keys of its Notifiers' listening connections,
	// which its writes do not notify (see NewNotifier).
	listeners ownListeners
	// key seals the payloads this Backend writes and opens sealed ones
	// (WithKey); nil writes them plain, with checksums.
	key *storekey.Key
	// notice is where Migrate says what it could not do and did without
	// (WithNotice).
	notice func(string)
}

var (
	_ sessions.Backend        = (*Backend)(nil)
	_ sessions.PartialLoader  = (*Backend)(nil)
	_ sessions.HistoryBackend = (*Backend)(nil)
	_ sessions.RunBackend     = (*Backend)(nil)
)

// Option configures Open.
type Option func(*Backend)

// WithDurability sets what commits survive (default
// sessions.DurabilityProcess, which keeps the server's
// synchronous_commit). DurabilityFull sets synchronous_commit=on on
// skein's connections, so that a commit is flushed to the server's disk
// before it returns whatever the server's default. See the package doc.
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

// WithNotice makes Migrate call fn with what it could not do and
// went on without, in a sentence: the trigram index of listings' text
// search when the pg_trgm extension cannot be used (see migrate).
func WithNotice(fn func(string)) Option {
	return func(b *Backend) { b.notice = fn }
}

// MaxConns returns the size of the backend's connection pool: the most
// round trips it has in flight at once.
func (b *Backend) MaxConns() int { return int(b.pool.Config().MaxConns) }

// DefaultMaxConns is the size of a Backend's connection pool when
// neither WithMaxConns nor the DSN's pool_max_conns sets it: 4 per core
// (GOMAXPROCS), at least pgxpool's own default. Connections are opened
// when needed, so an idle process holds few.
func DefaultMaxConns() int32 { return int32(4 * runtime.GOMAXPROCS(0)) }

// WithMaxConns caps the backend's connection pool (default:
// DefaultMaxConns, or the DSN's pool_max_conns).
func WithMaxConns(n int32) Option {
	return func(b *Backend) { b.maxConns = n }
}

// IsDSN reports whether s names a PostgreSQL database: a URL of scheme
// postgres:// or postgresql://.
func IsDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database dsn names (a postgres:// URL; the
// libpq parameters pgx knows are accepted in its query, and
// search_path picks the schema), checks that skein's tables in the first
// schema of the search path are at SchemaVersion, and returns the
// backend. It changes nothing in the schema: a schema without skein's
// tables, or with an older version of them, is an error that wraps
// ErrNeedsMigration (Migrate creates and upgrades them). Errors show the
// DSN without its password.
func Open(ctx context.Context, dsn string, opts ...Option) (*Backend, error) {
	b := &Backend{dsn: Redact(dsn), durability: sessions.DurabilityProcess}
	for _, o := range opts {
		o(b)
	}
	if _, err := sessions.ParseDurability(string(b.durability)); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if !IsDSN(dsn) {
		return nil, fmt.Errorf("postgres: the database must be a postgres:// URL, not %s", b.dsn)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", b.dsn, redactErr(err, dsn))
	}
	if b.durability == sessions.DurabilityFull {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	}
	switch {
	case b.maxConns > 0:
		cfg.MaxConns = b.maxConns
	case !strings.Contains(dsn, "pool_max_conns"):
		// pgxpool's default (4, or the cores when more) keeps most of a
		// server's turns waiting for a connection between round trips.
		cfg.MaxConns = max(cfg.MaxConns, DefaultMaxConns())
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", b.dsn, redactErr(err, dsn))
	}
	b.pool = pool
	if b.schema, err = checkVersion(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: %s: %w", b.dsn, redactErr(err, dsn))
	}
	return b, nil
}

// Migrate creates skein's tables in the first schema of the search path
// of the database dsn names, or upgrades them to SchemaVersion, in one
// transaction (concurrent calls wait for each other; the second finds
// nothing to do). It returns the version the schema was at (0: no
// tables). It is the only code of skein that changes the schema: its
// role needs CREATE on the schema (and to own the tables, to upgrade
// them); the roles that then use the store need only the grants
// docs/security.md lists. Of opts, it uses WithKey (a migration that
// reads sealed values needs the store's key) and WithNotice.
func Migrate(ctx context.Context, dsn string, opts ...Option) (from int, err error) {
	b := &Backend{}
	for _, o := range opts {
		o(b)
	}
	red := Redact(dsn)
	if !IsDSN(dsn) {
		return 0, fmt.Errorf("postgres: the database must be a postgres:// URL, not %s", red)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return 0, fmt.Errorf("postgres: %s: %w", red, redactErr(err, dsn))
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, fmt.Errorf("postgres: %s: %w", red, redactErr(err, dsn))
	}
	defer pool.Close()
	if _, from, err = migrate(ctx, pool, b.key, b.notice); err != nil {
		return 0, fmt.Errorf("postgres: %s: %w", red, redactErr(err, dsn))
	}
	return from, nil
}

// DSN returns the database's DSN without its password.
func (b *Backend) DSN() string { return b.dsn }

// Durability returns the backend's durability level.
func (b *Backend) Durability() sessions.Durability { return b.durability }

// Durable reports true: sessions outlive the process.
func (b *Backend) Durable() bool { return true }

// Close closes the connection pool. Calling it again does nothing.
func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

// Pool returns the backend's connection pool, for the other parts of
// skein that share the database (serve's notifications and locks).
func (b *Backend) Pool() *pgxpool.Pool { return b.pool }

// inTx runs fn in a transaction with options o and commits it if fn
// succeeds.
func (b *Backend) inTx(ctx context.Context, o pgx.TxOptions, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, b.pool, o, fn)
}

// write runs fn in a read-write transaction (read committed: every
// statement sees what committed before it; rows are locked explicitly).
func (b *Backend) write(ctx context.Context, fn func(pgx.Tx) error) error {
	ctx, err := uncancelled(ctx)
	if err != nil {
		return err
	}
	return b.inTx(ctx, pgx.TxOptions{}, fn)
}

// uncancelled returns ctx without its cancellation, or ctx's error if it
// is done already. A write that has begun runs to its commit or rollback:
// cancelled in the middle, its commit might land after the caller was
// told it failed, and the caller's idea of the session's version would
// be wrong.
func uncancelled(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// read runs fn in a read-only repeatable-read transaction: every query of
// fn sees the same committed state.
func (b *Backend) read(ctx context.Context, fn func(pgx.Tx) error) error {
	return b.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// errNoRows reports whether err is pgx's "no rows in result set".
func errNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
