package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the schema version this package writes and reads; it
// is len(migrations).
const SchemaVersion = 1

// migrations[n] moves the schema from version n to n+1. Released
// migrations are never edited: a change to the schema is a new migration
// appended here, with SchemaVersion raised to match.
var migrations = []string{migration1}

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

// migrationsTable records the migrations applied, one row each.
const migrationsTable = `CREATE TABLE IF NOT EXISTS skein_migrations (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// migrate brings the schema to SchemaVersion in one transaction that
// holds an advisory lock named after the schema, so concurrent openers of
// a new database wait for the first to migrate it and then find nothing
// to do. A schema newer than this package knows is refused.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var schema *string
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
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('skein migrations ' || current_schema(), 0))`); err != nil {
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
}
