package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/internal/rowstore"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// applicationID marks a SQLite file as a skein session database
// (PRAGMA application_id; "skei").
const applicationID = 0x736b6569

// SchemaVersion is the schema version this package writes and reads
// (PRAGMA user_version); it is len(migrations).
const SchemaVersion = 14

// migrations[n] moves the schema from version n to n+1. Released
// migrations are never edited: a change to the schema is a new migration
// appended here, with SchemaVersion raised to match.
var migrations = []string{migration1, migration2, migration3, migration4, migration5, migration6, migration7, migration8, migration9, migration10, migration11, migration12, migration13, migration14}

// migrationStep is the Go step of the migration to version v, if it has
// one: run after that migration's SQL, in the same transaction, with the
// store's key (nil: none).
func migrationStep(v int) func(context.Context, *sql.Tx, *storekey.Key) error {
	switch v {
	case 8:
		return func(ctx context.Context, tx *sql.Tx, _ *storekey.Key) error { return identifyMessages(ctx, tx) }
	case 9:
		return func(ctx context.Context, tx *sql.Tx, _ *storekey.Key) error { return toWrites(ctx, tx) }
	case 14:
		return sealedLabels
	}
	return nil
}

const migration1 = `
CREATE TABLE sessions (
	sid         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT    NOT NULL UNIQUE,
	status      TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	summary     TEXT,
	metadata    TEXT,
	parent_id   TEXT,
	branched_at INTEGER,
	turns       INTEGER NOT NULL,
	max_turns   INTEGER NOT NULL,
	version     INTEGER NOT NULL,
	base        INTEGER REFERENCES views (vid),
	base_from   INTEGER NOT NULL,
	base_to     INTEGER NOT NULL,
	own_from    INTEGER NOT NULL,
	length      INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_by_created ON sessions (created_at, id);
CREATE INDEX sessions_by_status ON sessions (status, created_at, id);
CREATE INDEX sessions_by_parent ON sessions (parent_id, created_at, id);
CREATE INDEX sessions_by_updated ON sessions (updated_at);
CREATE INDEX sessions_by_base ON sessions (base);

CREATE TABLE views (
	vid       INTEGER PRIMARY KEY,
	sid       INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
	base      INTEGER REFERENCES views (vid),
	base_from INTEGER NOT NULL,
	base_to   INTEGER NOT NULL,
	own_from  INTEGER NOT NULL
) STRICT;
CREATE INDEX views_by_session ON views (sid);
CREATE INDEX views_by_base ON views (base);

CREATE TABLE messages (
	sid  INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
	pos  INTEGER NOT NULL,
	body TEXT    NOT NULL,
	PRIMARY KEY (sid, pos)
) STRICT;

CREATE TABLE events (
	sid     INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
	seq     INTEGER NOT NULL,
	type    TEXT    NOT NULL,
	time    INTEGER NOT NULL,
	corr_id TEXT,
	data    TEXT,
	PRIMARY KEY (sid, seq)
) STRICT;
`

// migration2 records, for a "message" event, the position of the message
// row it appended (sessions.HistoryBackend): NULL for other events and
// for message events of version 1.
const migration2 = `
ALTER TABLE events ADD COLUMN pos INTEGER;
`

// migration4 adds workflow run records (sessions.RunBackend): one row per
// run, its header a JSON document, and one row per stage run, appended.
const migration4 = `
CREATE TABLE runs (
	rid         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT    NOT NULL UNIQUE,
	workflow    TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	head        TEXT    NOT NULL,
	steps       INTEGER NOT NULL
) STRICT;
CREATE INDEX runs_by_created ON runs (created_at, id);

CREATE TABLE run_steps (
	rid  INTEGER NOT NULL REFERENCES runs (rid) ON DELETE CASCADE,
	pos  INTEGER NOT NULL,
	body TEXT    NOT NULL,
	PRIMARY KEY (rid, pos)
) STRICT;
`

// checkSchema returns the database's schema version, or an error for a
// database of another application or of a newer skein.
func checkSchema(ctx context.Context, q querier) (int, error) {
	var version, appID, objects int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return 0, err
	}
	if err := q.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return 0, err
	}
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
		return 0, err
	}
	switch {
	case appID != applicationID && (appID != 0 || objects > 0):
		return 0, fmt.Errorf("not a skein session database (application_id %#x, %d schema objects)", appID, objects)
	case version > SchemaVersion:
		return 0, fmt.Errorf("schema version %d is newer than this skein supports (%d): open it with a newer skein", version, SchemaVersion)
	}
	return version, nil
}

// migrate brings the database to SchemaVersion in one write transaction,
// so concurrent openers migrate a new file once; k is the store's key,
// which a step may need to open sealed values.
func migrate(ctx context.Context, db *sql.DB, k *storekey.Key) error {
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (see dsn)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	version, err := checkSchema(ctx, tx)
	if err != nil || version == SchemaVersion {
		return err
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
		if step := migrationStep(v + 1); step != nil {
			if err := step(ctx, tx, k); err != nil {
				return fmt.Errorf("migration %d: %w", v+1, err)
			}
		}
	}
	// PRAGMA arguments cannot be bound parameters.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d; PRAGMA application_id = %d", SchemaVersion, applicationID)); err != nil {
		return err
	}
	return tx.Commit()
}

// migration10 adds columns repo_id and agent to sessions, read from the
// metadata's "repoId" and "agent" strings (skein serve's keys; NULL when
// missing or not a string), with an index each, so that a listing
// filtered on them reads only the matching rows; view session_heads
// shows them.
const migration10 = `
ALTER TABLE sessions ADD COLUMN repo_id TEXT GENERATED ALWAYS AS
	(CASE WHEN json_type(metadata, '$.repoId') = 'text' THEN json_extract(metadata, '$.repoId') END) VIRTUAL;
ALTER TABLE sessions ADD COLUMN agent TEXT GENERATED ALWAYS AS
	(CASE WHEN json_type(metadata, '$.agent') = 'text' THEN json_extract(metadata, '$.agent') END) VIRTUAL;
CREATE INDEX sessions_by_repo ON sessions (repo_id, created_at, id);
CREATE INDEX sessions_by_agent ON sessions (agent, created_at, id);
DROP VIEW session_heads;
CREATE VIEW session_heads AS
	SELECT s.sid, s.id, s.status, s.created_at, w.updated_at, s.summary, s.metadata, s.parent_id,
		s.branched_at, w.turns, s.max_turns, w.version, s.base, w.base_from, w.base_to, w.own_from,
		w.length, s.title, s.first_prompt, w.seq_end, s.repo_id, s.agent
	FROM sessions s JOIN writes w ON w.key = (SELECT max(key) FROM writes WHERE key >= s.sid << 32 AND key < (s.sid + 1) << 32);
`

// migration11 adds the repositories skein serve's sessions are bound to
// (sessions.RepoBackend): one row each, keyed by id.
const migration11 = `
CREATE TABLE repos (
	id         TEXT    NOT NULL PRIMARY KEY,
	path       TEXT    NOT NULL,
	created_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
`

// migration12 adds checksums to every stored payload besides message
// bodies (which have theirs since version 6): columns summary_crc,
// metadata_crc, title_crc and first_prompt_crc of sessions hold the
// sessions.Checksum of the value beside them, and events_crc of writes
// that of the row's events blob. A value sealed with a store key
// (sessions/storekey) has none (NULL): GCM's tag checks it. Values
// stored before this version are marked rowstore.LegacySum (-1) and
// read unchecked; events blobs of earlier rows have no checksum (NULL).
// View session_heads shows the new session columns.
const migration12 = `
ALTER TABLE sessions ADD COLUMN summary_crc INTEGER;
ALTER TABLE sessions ADD COLUMN metadata_crc INTEGER;
ALTER TABLE sessions ADD COLUMN title_crc INTEGER;
ALTER TABLE sessions ADD COLUMN first_prompt_crc INTEGER;
UPDATE sessions SET summary_crc = iif(summary IS NULL, NULL, -1), metadata_crc = iif(metadata IS NULL, NULL, -1),
	title_crc = iif(title IS NULL, NULL, -1), first_prompt_crc = iif(first_prompt IS NULL, NULL, -1);
ALTER TABLE writes ADD COLUMN events_crc INTEGER;
DROP VIEW session_heads;
CREATE VIEW session_heads AS
	SELECT s.sid, s.id, s.status, s.created_at, w.updated_at, s.summary, s.metadata, s.parent_id,
		s.branched_at, w.turns, s.max_turns, w.version, s.base, w.base_from, w.base_to, w.own_from,
		w.length, s.title, s.first_prompt, w.seq_end, s.repo_id, s.agent,
		s.summary_crc, s.metadata_crc, s.title_crc, s.first_prompt_crc
	FROM sessions s JOIN writes w ON w.key = (SELECT max(key) FROM writes WHERE key >= s.sid << 32 AND key < (s.sid + 1) << 32);
`

// migration13 adds column touched to sessions: the minute of the
// session's last write (rowstore.Touched of its newest writes row's
// updated_at), indexed, so that a listing by update time seeks to the
// sessions written about then instead of reading every session's newest
// write. A write changes it (an UPDATE of the sessions row and its index
// entry) only when its minute is not the row's (see insertWrite): once a
// minute at most. View session_heads shows it.
const migration13 = `
ALTER TABLE sessions ADD COLUMN touched INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET touched = coalesce((SELECT w.updated_at - w.updated_at % 60000000000 FROM writes w
	WHERE w.key = (SELECT max(key) FROM writes WHERE key >= sessions.sid << 32 AND key < (sessions.sid + 1) << 32)), 0);
CREATE INDEX sessions_by_touched ON sessions (touched);
DROP VIEW session_heads;
CREATE VIEW session_heads AS
	SELECT s.sid, s.id, s.status, s.created_at, w.updated_at, s.summary, s.metadata, s.parent_id,
		s.branched_at, w.turns, s.max_turns, w.version, s.base, w.base_from, w.base_to, w.own_from,
		w.length, s.title, s.first_prompt, w.seq_end, s.repo_id, s.agent,
		s.summary_crc, s.metadata_crc, s.title_crc, s.first_prompt_crc, s.touched
	FROM sessions s JOIN writes w ON w.key = (SELECT max(key) FROM writes WHERE key >= s.sid << 32 AND key < (s.sid + 1) << 32);
`

// migration14 makes repo_id and agent plain columns that the store
// writes with every write of the metadata (rowstore.Labels), instead of
// columns generated from the metadata, which read NULL for a sealed one:
// so a listing filtered on them uses their indexes with a store key too.
// The SQL fills them for plain metadata; sealedLabels opens sealed ones.
// It adds an index on (repo_id, status, created_at, id), which counts the
// sessions of a repository in a status without reading their rows; and
// session_text, an FTS5 table of each session's id and label (title,
// else first prompt: rowstore.LabelSQL) with the trigram tokenizer, which,
// kept in step by triggers, finds the sessions whose id or label contains
// a text of three characters or more (ListFilter.Text) without reading
// every label. A sealed label is not in it (its checksum column is NULL:
// see migration12): it would be ciphertext, and with a key the text
// search runs on the opened labels. View session_heads is made again.
const migration14 = `
DROP VIEW session_heads;
DROP INDEX sessions_by_repo;
DROP INDEX sessions_by_agent;
ALTER TABLE sessions DROP COLUMN repo_id;
ALTER TABLE sessions DROP COLUMN agent;
ALTER TABLE sessions ADD COLUMN repo_id TEXT;
ALTER TABLE sessions ADD COLUMN agent TEXT;
UPDATE sessions SET
	repo_id = CASE WHEN json_type(metadata, '$.repoId') = 'text' THEN json_extract(metadata, '$.repoId') END,
	agent = CASE WHEN json_type(metadata, '$.agent') = 'text' THEN json_extract(metadata, '$.agent') END
	WHERE json_type(metadata) = 'object';
CREATE INDEX sessions_by_repo ON sessions (repo_id, created_at, id);
CREATE INDEX sessions_by_repo_status ON sessions (repo_id, status, created_at, id);
CREATE INDEX sessions_by_agent ON sessions (agent, created_at, id);
CREATE VIEW session_heads AS
	SELECT s.sid, s.id, s.status, s.created_at, w.updated_at, s.summary, s.metadata, s.parent_id,
		s.branched_at, w.turns, s.max_turns, w.version, s.base, w.base_from, w.base_to, w.own_from,
		w.length, s.title, s.first_prompt, w.seq_end, s.repo_id, s.agent,
		s.summary_crc, s.metadata_crc, s.title_crc, s.first_prompt_crc, s.touched
	FROM sessions s JOIN writes w ON w.key = (SELECT max(key) FROM writes WHERE key >= s.sid << 32 AND key < (s.sid + 1) << 32);

CREATE VIRTUAL TABLE session_text USING fts5(id, label, tokenize = 'trigram');
INSERT INTO session_text (rowid, id, label)
	SELECT sid, id, CASE WHEN coalesce(title, '') = '' THEN coalesce(first_prompt, '') ELSE title END FROM sessions
	WHERE CASE WHEN coalesce(title, '') = '' THEN first_prompt IS NULL OR first_prompt_crc IS NOT NULL ELSE title_crc IS NOT NULL END;
CREATE TRIGGER session_text_insert AFTER INSERT ON sessions
	WHEN CASE WHEN coalesce(new.title, '') = '' THEN new.first_prompt IS NULL OR new.first_prompt_crc IS NOT NULL ELSE new.title_crc IS NOT NULL END
BEGIN
	INSERT INTO session_text (rowid, id, label)
		VALUES (new.sid, new.id, CASE WHEN coalesce(new.title, '') = '' THEN coalesce(new.first_prompt, '') ELSE new.title END);
END;
CREATE TRIGGER session_text_update AFTER UPDATE OF title, first_prompt ON sessions
	WHEN old.title IS NOT new.title OR old.first_prompt IS NOT new.first_prompt
BEGIN
	DELETE FROM session_text WHERE rowid = old.sid;
	INSERT INTO session_text (rowid, id, label)
		SELECT new.sid, new.id, CASE WHEN coalesce(new.title, '') = '' THEN coalesce(new.first_prompt, '') ELSE new.title END
		WHERE CASE WHEN coalesce(new.title, '') = '' THEN new.first_prompt IS NULL OR new.first_prompt_crc IS NOT NULL ELSE new.title_crc IS NOT NULL END;
END;
CREATE TRIGGER session_text_delete AFTER DELETE ON sessions BEGIN
	DELETE FROM session_text WHERE rowid = old.sid;
END;
`

// sealedLabels is migration 14's step: it fills repo_id and agent of
// the sessions whose metadata is sealed (a JSON string, see
// rowstore.Stored), opened with k; without k, a store that holds any is
// an error that says to give the key.
func sealedLabels(ctx context.Context, tx *sql.Tx, k *storekey.Key) error {
	var sealed []rowstore.SealedMetadata
	err := eachRow(ctx, tx, `SELECT sid, id, metadata, metadata_crc FROM sessions WHERE json_type(metadata) = 'text'`, nil, func(rows *sql.Rows) error {
		var r rowstore.SealedMetadata
		err := rows.Scan(&r.Row, &r.ID, &r.Metadata, &r.Sum)
		sealed = append(sealed, r)
		return err
	})
	if err != nil {
		return err
	}
	return rowstore.FillLabels(k, sealed, func(sid int64, l rowstore.Labels) error {
		_, err := tx.ExecContext(ctx, `UPDATE sessions SET repo_id = ?, agent = ? WHERE sid = ?`, l.RepoID, l.Agent, sid)
		return err
	})
}

// migration3 adds the session's title and its derived first prompt (the
// listing's label when there is no title; sessions.Record.FirstPrompt).
const migration3 = `
ALTER TABLE sessions ADD COLUMN title TEXT;
ALTER TABLE sessions ADD COLUMN first_prompt TEXT;
`

// migration5 makes a write touch fewer pages, so it writes fewer WAL
// frames (see BenchmarkW2 in package bench): messages and events become
// WITHOUT ROWID tables, stored in their (sid, pos) and (sid, seq) key
// order, so a new row changes one b-tree instead of the table and its
// primary-key index; and sessions_by_updated goes, since every write
// changes updated_at and so moved the session's entry in that index
// (listing by update time, which only gc does, scans the sessions).
const migration5 = `
CREATE TABLE messages5 (
	sid  INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
	pos  INTEGER NOT NULL,
	body TEXT    NOT NULL,
	PRIMARY KEY (sid, pos)
) STRICT, WITHOUT ROWID;
INSERT INTO messages5 (sid, pos, body) SELECT sid, pos, body FROM messages;
DROP TABLE messages;
ALTER TABLE messages5 RENAME TO messages;

CREATE TABLE events5 (
	sid     INTEGER NOT NULL REFERENCES sessions (sid) ON DELETE CASCADE,
	seq     INTEGER NOT NULL,
	type    TEXT    NOT NULL,
	time    INTEGER NOT NULL,
	corr_id TEXT,
	data    TEXT,
	pos     INTEGER,
	PRIMARY KEY (sid, seq)
) STRICT, WITHOUT ROWID;
INSERT INTO events5 (sid, seq, type, time, corr_id, data, pos) SELECT sid, seq, type, time, corr_id, data, pos FROM events;
DROP TABLE events;
ALTER TABLE events5 RENAME TO events;

DROP INDEX sessions_by_updated;
`

// migration6 stores a checksum with every message row (crc: CRC-32C of
// body, sessions.Checksum), computed once when the message is appended
// and verified on every load, so a damaged page or a hand-edited row is
// an error naming the session and message instead of altered text. Rows
// written before version 6 have none (NULL) and are read unchecked.
const migration6 = `
ALTER TABLE messages ADD COLUMN crc INTEGER;
`

// migration7 adds the cross-process locks (sessions.Locker, see
// locks.go): one row per held lock, naming its holder (a token per
// lock), the holder's process (host and pid, to tell whether it is
// alive), when its lease ends, and the reason another holder asked for
// it with, if one did.
const migration7 = `
CREATE TABLE locks (
	name      TEXT    PRIMARY KEY,
	holder    TEXT    NOT NULL,
	host      TEXT    NOT NULL,
	pid       INTEGER NOT NULL,
	expires   INTEGER NOT NULL,
	interrupt TEXT
) STRICT, WITHOUT ROWID;
`

// migration8 gives every message row an id and a time (message.Message's
// ID and CreatedAt), which rows of version 8 carry in their body: its SQL
// does nothing, and identifyMessages rewrites the rows of earlier
// versions.
const migration8 = `SELECT 1;`

// identifyMessages is migration 8's step. A row whose body has no id gets
// sessions.DerivedMessageID of its time and its position (sid, pos), so
// the rows a fork shares keep one id for the parent and the fork. Its time
// is that of the "message" event that appended it (version 2 on), else
// the previous row's of the session, else the session's creation. The
// body is written again as message.Message encodes it and its checksum
// (version 6) computed, also for rows of version 5 and older that had
// none; a row whose checksum already fails is left alone, so its damage is
// still reported on load. It reads one session's rows at a time.
func identifyMessages(ctx context.Context, tx *sql.Tx) error {
	type session struct {
		sid     int64
		created int64
	}
	var list []session
	err := eachRow(ctx, tx, `SELECT sid, created_at FROM sessions ORDER BY sid`, nil, func(rows *sql.Rows) error {
		var s session
		err := rows.Scan(&s.sid, &s.created)
		list = append(list, s)
		return err
	})
	if err != nil {
		return err
	}
	for _, s := range list {
		if err := identifySession(ctx, tx, s.sid, rowstore.DecodeTime(s.created)); err != nil {
			return fmt.Errorf("session row %d: %w", s.sid, err)
		}
	}
	return nil
}

// rowsQuerier is what *sql.Tx and *sql.DB share for queries.
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// eachRow runs query with args in q and calls scan for each row, in
// order; the rows are closed before it returns.
func eachRow(ctx context.Context, q rowsQuerier, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// identifySession is identifyMessages for the rows of one session.
func identifySession(ctx context.Context, tx *sql.Tx, sid int64, created time.Time) error {
	times := map[int64]time.Time{}
	err := eachRow(ctx, tx, `SELECT pos, time FROM events WHERE sid = ? AND pos IS NOT NULL`, []any{sid}, func(rows *sql.Rows) error {
		var pos, t int64
		err := rows.Scan(&pos, &t)
		times[pos] = rowstore.DecodeTime(t)
		return err
	})
	if err != nil {
		return err
	}
	type row struct {
		pos  int64
		body string
		crc  sql.NullInt64
	}
	var msgs []row
	err = eachRow(ctx, tx, `SELECT pos, body, crc FROM messages WHERE sid = ? ORDER BY pos`, []any{sid}, func(rows *sql.Rows) error {
		var r row
		err := rows.Scan(&r.pos, &r.body, &r.crc)
		msgs = append(msgs, r)
		return err
	})
	if err != nil {
		return err
	}
	at := created.UTC()
	for _, r := range msgs {
		if t, ok := times[r.pos]; ok {
			at = t.UTC()
		}
		if r.crc.Valid && sessions.VerifyChecksum(int(r.pos), []byte(r.body), uint32(r.crc.Int64)) != nil {
			continue // damaged: the load reports it
		}
		var m message.Message
		if err := json.Unmarshal([]byte(r.body), &m); err != nil {
			return fmt.Errorf("message row %d: %w", r.pos, err)
		}
		if m.ID != "" {
			if !m.CreatedAt.IsZero() {
				at = m.CreatedAt
			}
			continue
		}
		m.ID, m.CreatedAt = sessions.DerivedMessageID(at, fmt.Sprintf("sqlite/%d/%d", sid, r.pos)), at
		body, err := rowstore.EncodeMessage(nil, &m)
		if err != nil {
			return fmt.Errorf("message row %d: %w", r.pos, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE messages SET body = ?, crc = ? WHERE sid = ? AND pos = ?`,
			body.JSON, int64(body.Sum), sid, r.pos); err != nil {
			return err
		}
	}
	return nil
}
