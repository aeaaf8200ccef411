package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/storekey"
)

// SchemaVersion is the schema version this package writes and reads; it
// is len(migrations).
const SchemaVersion = 12

// migrations[n] moves the schema from version n to n+1. Released
// migrations are never edited: a change to the schema is a new migration
// appended here, with SchemaVersion raised to match. Only Migrate
// applies them (skein migrate): Open checks the version and changes
// nothing, so the roles skein runs as need no privilege on the schema
// beyond reading and writing rows (see docs/security.md).
var migrations = []string{migration1, migration2, migration3, migration4, migration5, migration6, migration7, migration8, migration9, migration10, migration11, migration12}

// migrationStep is the Go step of the migration to version v, if it has
// one: run after that migration's SQL, in the same transaction, with the
// store's key (nil: none).
func migrationStep(v int) func(context.Context, pgx.Tx, *storekey.Key) error {
	if v == 8 {
		return sealedLabels
	}
	return nil
}

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

// migration3 puts skein_notify_events in a trigger on skein_events
// (step "notify", which a serve replica's notifier used to apply at run
// time, needing the TRIGGER privilege), unless the step was applied: every
// write that appends events notifies from now on, whether or not a server
// listens (a committed append took 1.2 to 1.3 times as long with it),
// and serve changes nothing in the schema. Migration 9 drops it again:
// the writes notify themselves.
const migration3 = `
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM skein_steps WHERE name = 'notify') THEN
		CREATE TRIGGER skein_events_notify AFTER INSERT ON skein_events
			REFERENCING NEW TABLE AS skein_new_events
			FOR EACH STATEMENT EXECUTE FUNCTION skein_notify_events();
		INSERT INTO skein_steps (name) VALUES ('notify');
	END IF;
END
$$;
`

// migration4 adds columns repo_id and agent to skein_sessions, computed
// from the metadata's "repoId" and "agent" strings (skein serve's keys;
// NULL when missing or not a string), with an index each, so that a
// listing filtered on them reads only the matching rows.
const migration4 = `
ALTER TABLE skein_sessions ADD COLUMN repo_id text COLLATE "C" GENERATED ALWAYS AS
	(CASE WHEN jsonb_typeof(metadata::jsonb -> 'repoId') = 'string' THEN metadata::jsonb ->> 'repoId' END) STORED;
ALTER TABLE skein_sessions ADD COLUMN agent text COLLATE "C" GENERATED ALWAYS AS
	(CASE WHEN jsonb_typeof(metadata::jsonb -> 'agent') = 'string' THEN metadata::jsonb ->> 'agent' END) STORED;
CREATE INDEX skein_sessions_by_repo ON skein_sessions (repo_id, created_at, id);
CREATE INDEX skein_sessions_by_agent ON skein_sessions (agent, created_at, id);
`

// migration5 adds the repositories skein serve's sessions are bound to
// (sessions.RepoBackend): one row each, keyed by id.
const migration5 = `
CREATE TABLE skein_repos (
	id         text   COLLATE "C" PRIMARY KEY,
	path       text   NOT NULL,
	created_at bigint NOT NULL
);
`

// migration6 adds checksums to every stored payload besides message
// bodies (whose crc migration 1 has): columns summary_crc, metadata_crc,
// title_crc and first_prompt_crc of skein_sessions and crc of
// skein_events (of its data) hold the sessions.Checksum of the value
// beside them. A value sealed with a store key (sessions/storekey) has
// none (NULL): GCM's tag checks it. Values stored before this version are
// marked rowstore.LegacySum (-1) and read unchecked; so are events' data
// (crc NULL).
const migration6 = `
ALTER TABLE skein_sessions ADD COLUMN summary_crc bigint, ADD COLUMN metadata_crc bigint,
	ADD COLUMN title_crc bigint, ADD COLUMN first_prompt_crc bigint;
UPDATE skein_sessions SET
	summary_crc = CASE WHEN summary IS NULL THEN NULL ELSE -1 END,
	metadata_crc = CASE WHEN metadata IS NULL THEN NULL ELSE -1 END,
	title_crc = CASE WHEN title IS NULL THEN NULL ELSE -1 END,
	first_prompt_crc = CASE WHEN first_prompt IS NULL THEN NULL ELSE -1 END;
ALTER TABLE skein_events ADD COLUMN crc bigint;
`

// migration7 adds column meta, the metadata as jsonb (generated from
// the text column, which keeps the bytes its checksum, metadata_crc, is
// of: jsonb would rewrite them), which a listing's metadata conditions
// read (sessions.WhereCond: meta -> 'key') without parsing every row's
// text; and column touched, the minute of the session's last write
// (rowstore.Touched), indexed: a listing by update time seeks to the
// sessions written about then. Computed from updated_at, touched
// changes at most once a minute, so most writes leave every indexed
// column as it was (PostgreSQL then updates the row in place, without
// new index entries: a HOT update).
const migration7 = `
ALTER TABLE skein_sessions
	ADD COLUMN meta jsonb GENERATED ALWAYS AS (metadata::jsonb) STORED,
	ADD COLUMN touched bigint GENERATED ALWAYS AS (updated_at - updated_at % 60000000000) STORED;
CREATE INDEX skein_sessions_by_touched ON skein_sessions (touched);
`

// migration8 makes repo_id and agent plain columns that the store
// writes with every write of the metadata (rowstore.Labels), keeping
// their values, instead of columns generated from the metadata, which
// read NULL for a sealed one: so a listing filtered on them uses their
// indexes with a store key too (sealedLabels fills them for sealed
// metadata). It adds an index on (repo_id, status, created_at, id), which
// counts the sessions of a repository in a status without reading their
// rows. The text search's trigram index is not a migration: see
// textIndex.
const migration8 = `
ALTER TABLE skein_sessions ALTER COLUMN repo_id DROP EXPRESSION, ALTER COLUMN agent DROP EXPRESSION;
CREATE INDEX skein_sessions_by_repo_status ON skein_sessions (repo_id, status, created_at, id);
`

// migration9 drops trigger skein_events_notify and its function
// skein_notify_events (migrations 2 and 3): the statements that append
// events notify the session's channel themselves (pg_notify in the same
// statement, see applySQL and insertRows), with the same channel and
// payload, at the same commit. The trigger cost every write that appends
// events a PL/pgSQL call, its query of the transition table and a
// planned pg_notify, about 7% of the database's CPU per served turn.
// Step "notify" stays recorded, so migration 3 never makes the trigger
// again.
const migration9 = `
DROP TRIGGER IF EXISTS skein_events_notify ON skein_events;
DROP FUNCTION IF EXISTS skein_notify_events();
`

// migration10 drops the foreign keys of skein_messages and skein_events
// on skein_sessions: PostgreSQL checked them once per inserted row, each
// check a query run through SPI (the executor started and ended for it),
// a quarter of the database's CPU for a write of 2 messages and 4
// events. skein's statements cannot insert a row for a missing session:
// a write inserts its rows from the RETURNING of its UPDATE of the
// session's row (none if the row is gone), which it holds locked until
// its commit; Create and Fork insert them in the transaction that
// inserted the row or locked it. What ON DELETE CASCADE did, trigger
// skein_sessions_delete does (once per statement, for the sessions it
// deleted, by the key's prefix), so a delete by any writer, an older
// skein's or a hand-written DELETE, still takes their messages and
// events with it. Deletes are rare; the writes of every turn no longer
// pay for the checks.
const migration10 = `
ALTER TABLE skein_messages DROP CONSTRAINT skein_messages_sid_fkey;
ALTER TABLE skein_events DROP CONSTRAINT skein_events_sid_fkey;

CREATE FUNCTION skein_delete_rows() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	DELETE FROM skein_messages m USING skein_deleted d WHERE m.sid = d.sid;
	DELETE FROM skein_events e USING skein_deleted d WHERE e.sid = d.sid;
	RETURN NULL;
END
$$;

CREATE TRIGGER skein_sessions_delete AFTER DELETE ON skein_sessions
	REFERENCING OLD TABLE AS skein_deleted
	FOR EACH STATEMENT EXECUTE FUNCTION skein_delete_rows();
`

// sealedLabels is migration 8's step: it fills repo_id and agent of the
// sessions whose metadata is sealed (a JSON string, see rowstore.Stored),
// opened with k; without k, a schema that holds any is an error that
// says to give the key.
func sealedLabels(ctx context.Context, tx pgx.Tx, k *storekey.Key) error {
	rows, err := tx.Query(ctx, `SELECT sid, id, metadata, metadata_crc FROM skein_sessions WHERE jsonb_typeof(meta) = 'string'`)
	if err != nil {
		return err
	}
	sealed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (rowstore.SealedMetadata, error) {
		var x rowstore.SealedMetadata
		err := r.Scan(&x.Row, &x.ID, &x.Metadata, &x.Sum)
		return x, err
	})
	if err != nil {
		return err
	}
	return rowstore.FillLabels(k, sealed, func(sid int64, l rowstore.Labels) error {
		_, err := tx.Exec(ctx, `UPDATE skein_sessions SET repo_id = $1, agent = $2 WHERE sid = $3`, l.RepoID, l.Agent, sid)
		return err
	})
}

// trgmExtension is the extension textIndex uses (a variable for the
// test of its absence).
var trgmExtension = "pg_trgm"

// textIndex gives skein_sessions the trigram index (GIN, pg_trgm's
// gin_trgm_ops) on lower(id) and lower() of the label
// (rowstore.LabelSQL), through which a listing's text search
// (ListFilter.Text: LIKE '%text%' on both) reads only the sessions
// whose id or label has the text's trigrams, instead of every session.
// It is step "trgm" (see skein_steps), tried by every migrate until it
// is applied: it uses pg_trgm where the database has it, else creates it
// in the schema (a trusted extension since PostgreSQL 13: the role needs
// CREATE on the database, which its owner has). When the extension is
// not installed on the server or the role may not create it, the
// listings work as before, reading the sessions, and textIndex returns a
// notice that says so, having changed nothing.
func textIndex(ctx context.Context, tx pgx.Tx) (notice string, err error) {
	var done bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM skein_steps WHERE name = 'trgm')`).Scan(&done); err != nil || done {
		return "", err
	}
	if _, err := tx.Exec(ctx, `SAVEPOINT skein_trgm`); err != nil {
		return "", err
	}
	if err := trigramIndex(ctx, tx); err != nil {
		if _, rerr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT skein_trgm`); rerr != nil {
			return "", rerr
		}
		return fmt.Sprintf("no trigram index for the text search of listings (q): %v; they read every session instead. "+
			"Install the extension (PostgreSQL's contrib package, e.g. postgresql-contrib) or have the database's owner run "+
			"CREATE EXTENSION %s, then run skein migrate again", err, trgmExtension), nil
	}
	_, err = tx.Exec(ctx, `RELEASE SAVEPOINT skein_trgm`)
	return "", err
}

// trigramIndex is textIndex's work, in its savepoint.
func trigramIndex(ctx context.Context, tx pgx.Tx) error {
	var schema *string
	err := tx.QueryRow(ctx, `SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = $1`, trgmExtension).Scan(&schema)
	if errNoRows(err) {
		if _, err := tx.Exec(ctx, `CREATE EXTENSION `+pgx.Identifier{trgmExtension}.Sanitize()); err != nil {
			return fmt.Errorf("extension %s: %w", trgmExtension, err)
		}
		err = tx.QueryRow(ctx, `SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = $1`, trgmExtension).Scan(&schema)
	}
	if err != nil {
		return err
	}
	ops := *schema + ".gin_trgm_ops" // regnamespace::text quotes the name when it needs it
	if _, err := tx.Exec(ctx, `CREATE INDEX skein_sessions_by_text ON skein_sessions USING gin (lower(id) `+ops+`, lower(`+rowstore.LabelSQL+`) `+ops+`)`); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO skein_steps (name) VALUES ('trgm')`)
	return err
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

// ErrNeedsMigration is the error of Open for a schema that has no
// skein tables yet or an older version of them: Migrate (skein migrate)
// brings it to SchemaVersion.
var ErrNeedsMigration = errors.New("the schema needs skein migrate")

// versionError is Open's error for a schema that is not at
// SchemaVersion.
type versionError struct {
	schema  string
	version int
}

func (e *versionError) Error() string {
	switch {
	case e.version == 0:
		return fmt.Sprintf("schema %s has no skein tables: create them with `skein migrate --store URL`, as a role that may create tables in it (see docs/security.md)", e.schema)
	case e.version < SchemaVersion:
		return fmt.Sprintf("schema %s is at version %d and this skein needs version %d: upgrade it with `skein migrate --store URL`, as a role that may change the schema (see docs/security.md)", e.schema, e.version, SchemaVersion)
	}
	return fmt.Sprintf("schema %s is at version %d, newer than this skein supports (%d): use a newer skein", e.schema, e.version, SchemaVersion)
}

func (e *versionError) Is(target error) bool {
	return target == ErrNeedsMigration && e.version < SchemaVersion
}

// currentSchema returns the schema skein's tables are in: the first of
// the search path that exists.
func currentSchema(ctx context.Context, q pgx.Tx) (string, error) {
	var schema *string
	if err := q.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return "", err
	}
	if schema == nil {
		var path string
		if err := q.QueryRow(ctx, `SHOW search_path`).Scan(&path); err != nil {
			return "", err
		}
		return "", fmt.Errorf("no schema to create skein's tables in: no schema of the search_path (%s) exists", path)
	}
	return *schema, nil
}

// checkVersion returns the schema's name if its skein tables are at
// SchemaVersion, else a *versionError. It reads and changes nothing
// else: a role with no privilege on the schema beyond reading its tables
// can run it.
func checkVersion(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var schema string
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if schema, err = currentSchema(ctx, tx); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('skein_migrations') IS NOT NULL`).Scan(&exists); err != nil {
			return err
		}
		version := 0
		if exists {
			if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM skein_migrations`).Scan(&version); err != nil {
				return err
			}
		}
		if version != SchemaVersion {
			return &versionError{schema: schema, version: version}
		}
		return nil
	})
	return schema, err
}

// migrate brings the schema to SchemaVersion in one transaction that
// holds an advisory lock named after the schema, so concurrent migrations
// of a new database wait for the first and then find nothing to do. A
// schema newer than this package knows is refused. Then it tries
// textIndex, and passes its notice, if any, to notice (when not nil). k
// is the store's key, which a step may need to open sealed values. It
// returns the schema's name and the version it was at.
func migrate(ctx context.Context, pool *pgxpool.Pool, k *storekey.Key, notice func(string)) (string, int, error) {
	var note string
	var schema string
	var from int
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		if schema, err = currentSchema(ctx, tx); err != nil {
			return err
		}
		if err := lockSchema(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, migrationsTable); err != nil {
			return fmt.Errorf("schema %s: %w", schema, err)
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM skein_migrations`).Scan(&from); err != nil {
			return err
		}
		if from > SchemaVersion {
			return &versionError{schema: schema, version: from}
		}
		for v := from; v < SchemaVersion; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("schema %s: migration %d: %w", schema, v+1, err)
			}
			if step := migrationStep(v + 1); step != nil {
				if err := step(ctx, tx, k); err != nil {
					return fmt.Errorf("schema %s: migration %d: %w", schema, v+1, err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO skein_migrations (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		note, err = textIndex(ctx, tx)
		return err
	})
	if err != nil {
		return "", 0, err
	}
	if note != "" && notice != nil {
		notice(fmt.Sprintf("schema %s: %s", schema, note))
	}
	return schema, from, nil
}

// migration11 lets a turn's lock (Locker.TryLockVersion) be taken and
// released without writing a row (see NewLocker): column conn of
// skein_locks is the connection key of the connection holding the lock
// (an advisory lock it holds as long as it lives), so that a row whose
// connection is alive is not abandoned even once its lock is released;
// and table skein_lock_interrupts holds Interrupt's marks, one per hold
// asked (the lock's name, the number of its hold lock, the reason), in
// place of column interrupt, which is no longer written. Taking and
// releasing a turn's lock were two write transactions per turn.
const migration11 = `
ALTER TABLE skein_locks ADD COLUMN conn bigint;

CREATE TABLE skein_lock_interrupts (
	name   text   COLLATE "C" NOT NULL,
	hold   bigint NOT NULL,
	reason text   NOT NULL,
	PRIMARY KEY (name, hold)
);
`

// migration12 adds table skein_listeners: one row per listening
// connection of a Notifier (NewNotifier), by the advisory lock that
// connection holds as long as it lives (its key), so that a write
// notifies the channel of its session only when a listener other than
// its own Backend's is registered (see NewNotifier). A process with the
// only listener skipped nothing for it before: each of its writes woke
// its listener's backend and then its notifier, for events its streams
// get from the store's observer.
const migration12 = `
CREATE TABLE skein_listeners (
	key bigint PRIMARY KEY
);
`
