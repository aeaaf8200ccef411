package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the schema version this package writes and reads; it
// is len(migrations).
const SchemaVersion = 2

// migrations[n] moves the schema from version n to n+1. Released
// migrations are never edited: a change to the schema is a new migration
// appended here, with SchemaVersion raised to match.
var migrations = []string{migration1, migration2}

// migration1 is the first schema: the tables of package sqlite's version
// 6 (a message row's crc is the sessions.Checksum of its body), with ids compared byte by byte (COLLATE "C", as SQLite does) so that
// listings order them the same way.
const migration1 = `
CREATE TABLE skein_sessions (
	sid          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text    COLLATE "C" NOT NULL UNIQUE,
	status       text    NOT NULL,
	created_at   bigint  NOT NULL,
	updated_at   bigint  NOT NULL,
	summary      text,
	metadata     text,
	parent_id    text    COLLATE "C",
	branched_at  bigint,
	turns        bigint  NOT NULL,
	max_turns    bigint  NOT NULL,
	version      bigint  NOT NULL,
	base         bigint,
	base_from    bigint  NOT NULL,
	base_to      bigint  NOT NULL,
	own_from     bigint  NOT NULL,
	length       bigint  NOT NULL,
	title        text,
	first_prompt text
);
CREATE INDEX skein_sessions_by_created ON skein_sessions (created_at, id);
CREATE INDEX skein_sessions_by_status ON skein_sessions (status, created_at, id);
CREATE INDEX skein_sessions_by_parent ON skein_sessions (parent_id, created_at, id);
CREATE INDEX skein_sessions_by_base ON skein_sessions (base);

CREATE TABLE skein_views (
	vid       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	sid       bigint NOT NULL REFERENCES skein_sessions (sid) ON DELETE CASCADE,
	base      bigint REFERENCES skein_views (vid),
	base_from bigint NOT NULL,
	base_to   bigint NOT NULL,
	own_from  bigint NOT NULL
);
CREATE INDEX skein_views_by_session ON skein_views (sid);
CREATE INDEX skein_views_by_base ON skein_views (base);
ALTER TABLE skein_sessions ADD FOREIGN KEY (base) REFERENCES skein_views (vid);

CREATE TABLE skein_messages (
	sid  bigint NOT NULL REFERENCES skein_sessions (sid) ON DELETE CASCADE,
	pos  bigint NOT NULL,
	body text   NOT NULL,
	crc  bigint NOT NULL,
	PRIMARY KEY (sid, pos)
);

CREATE TABLE skein_events (
	sid     bigint NOT NULL REFERENCES skein_sessions (sid) ON DELETE CASCADE,
	seq     bigint NOT NULL,
	type    text   NOT NULL,
	time    bigint NOT NULL,
	corr_id text,
	data    text,
	pos     bigint,
	PRIMARY KEY (sid, seq)
);

CREATE TABLE skein_runs (
	rid         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id          text   COLLATE "C" NOT NULL UNIQUE,
	workflow    text   NOT NULL,
	fingerprint text   NOT NULL,
	status      text   NOT NULL,
	created_at  bigint NOT NULL,
	updated_at  bigint NOT NULL,
	head        text   NOT NULL,
	steps       bigint NOT NULL
);
CREATE INDEX skein_runs_by_created ON skein_runs (created_at, id);

CREATE TABLE skein_run_steps (
	rid  bigint NOT NULL REFERENCES skein_runs (rid) ON DELETE CASCADE,
	pos  bigint NOT NULL,
	body text   NOT NULL,
	PRIMARY KEY (rid, pos)
);
`

// migration2 adds what the processes that share the database at run
// time (replicas of skein serve) use besides the tables of migration 1:
//
//   - table skein_locks: one row per lock held through a Locker (its name,
//     its holder's token, and the reason another holder asked for it);
//     the lock itself is a session-level advisory lock of the holder's
//     connection, which the server releases when the connection ends;
//   - function skein_notify_events, which notifies, in the transaction of
//     a statement that appended events (so at its commit), channel
//     eventChannel(schema, sid) of each session it appended to (sid: the
//     session's row id, so the function reads no other table), with the
//     seq of the newest event as the payload. It runs only once step
//     "notify" (see steps) has put it in a trigger on skein_events;
//   - table skein_steps: the named steps applied (see steps).
//
// Before this migration the first server to start made skein_locks, the
// function and the trigger itself, outside the versioned migrations: the
// IF NOT EXISTS and OR REPLACE keep such a database's objects, and a
// trigger it has is recorded as step "notify", so that it is made once.
const migration2 = `
CREATE TABLE IF NOT EXISTS skein_locks (
	name      text COLLATE "C" PRIMARY KEY,
	holder    text NOT NULL,
	interrupt text
);

CREATE OR REPLACE FUNCTION skein_notify_events() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
	r record;
BEGIN
	FOR r IN SELECT n.sid, max(n.seq) AS seq FROM skein_new_events n GROUP BY n.sid LOOP
		PERFORM pg_notify('skein_' || md5(TG_TABLE_SCHEMA || '/' || r.sid), r.seq::text);
	END LOOP;
	RETURN NULL;
END
$$;

CREATE TABLE skein_steps (
	name       text        COLLATE "C" PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO skein_steps (name) SELECT 'notify' FROM pg_trigger
	WHERE tgname = 'skein_events_notify' AND tgrelid = 'skein_events'::regclass;
`

// steps are the named steps of the schema: changes that only some
// databases get, each applied at most once, when skein first needs it,
// under the advisory lock of the migrations and recorded by name in
// skein_steps in the same transaction (see applyStep). Like migrations,
// a released step is never edited.
//
//   - "notify" puts skein_notify_events in a trigger on skein_events, so
//     that every write that appends events notifies (see NewNotifier).
//     A serve replica's notifier applies it: a database no server used
//     does not have the trigger, and its writes do not pay for it (a
//     committed append takes 1.2 to 1.3 times as long with it,
//     BenchmarkAppendNotify).
var steps = map[string]string{
	"notify": `CREATE TRIGGER skein_events_notify AFTER INSERT ON skein_events
	REFERENCING NEW TABLE AS skein_new_events
	FOR EACH STATEMENT EXECUTE FUNCTION skein_notify_events()`,
}

// migrationsTable records the migrations applied, one row each.
const migrationsTable = `CREATE TABLE IF NOT EXISTS skein_migrations (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// lockSchema takes, for the rest of tx, the advisory lock that
// serialises the changes of the schema (migrations and steps).
func lockSchema(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('skein migrations ' || current_schema(), 0))`)
	return err
}

// migrate brings the schema to SchemaVersion in one transaction that
// holds an advisory lock named after the schema, so concurrent openers of
// a new database wait for the first to migrate it and then find nothing
// to do. A schema newer than this package knows is refused. It returns
// the schema's name.
func migrate(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var schema *string
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return err
		}
		if schema == nil {
			var path string
			if err := tx.QueryRow(ctx, `SHOW search_path`).Scan(&path); err != nil {
				return err
			}
			return fmt.Errorf("no schema to create skein's tables in: no schema of the search_path (%s) exists", path)
		}
		if err := lockSchema(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, migrationsTable); err != nil {
			return fmt.Errorf("schema %s: %w", *schema, err)
		}
		var version int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM skein_migrations`).Scan(&version); err != nil {
			return err
		}
		if version > SchemaVersion {
			return fmt.Errorf("schema %s is at version %d, newer than this skein supports (%d): use a newer skein", *schema, version, SchemaVersion)
		}
		for v := version; v < SchemaVersion; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("schema %s: migration %d: %w", *schema, v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO skein_migrations (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return *schema, nil
}

// applyStep applies the named step (see steps) unless skein_steps records
// it: in one transaction that holds the lock of the migrations and checks
// again once it has it, so that processes applying it at once apply it
// once.
func (b *Backend) applyStep(ctx context.Context, name string) error {
	applied := `SELECT EXISTS (SELECT 1 FROM skein_steps WHERE name = $1)`
	var done bool
	if err := b.pool.QueryRow(ctx, applied, name).Scan(&done); err != nil || done {
		return stepErr(b, name, err)
	}
	err := b.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := lockSchema(ctx, tx); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, applied, name).Scan(&done); err != nil || done {
			return err
		}
		if _, err := tx.Exec(ctx, steps[name]); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO skein_steps (name) VALUES ($1)`, name)
		return err
	})
	return stepErr(b, name, err)
}

// stepErr is the error of applyStep, nil when err is.
func stepErr(b *Backend, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("postgres: %s: schema %s: step '%s': %w", b.dsn, b.schema, name, err)
}
