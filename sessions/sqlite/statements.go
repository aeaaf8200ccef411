package sqlite

import (
	"context"
	"database/sql"
	"errors"
)

// statements are the Backend's prepared statements for the writes every
// agent loop step and every workflow stage makes. database/sql prepares
// each once per connection and a transaction reuses it
// (sql.Tx.StmtContext), so a write compiles no SQL.
type statements struct {
	state       *sql.Stmt // a session's write state by id
	insertWrite *sql.Stmt // a write's row
	update      *sql.Stmt // the sessions row after a write that changes it
	// updateLean is update for a write that changes neither the
	// session's status nor its view's base: it leaves the indexed
	// columns alone, so SQLite touches none of the sessions indexes
	// (SQLite rewrites the entries of every index on a column an UPDATE
	// assigns, even to the same value).
	updateLean *sql.Stmt
	runCreate  *sql.Stmt // a new run record's row
	runUpdate  *sql.Stmt // a run record's row after a stage
	runStep    *sql.Stmt // a run record's step
	touch      *sql.Stmt // the sessions row's touched (see migration13)
	version    *sql.Stmt // a session's version and creation time by id (StoredVersion)
	lock       *sql.Stmt // a free lock's row (TryLock)
	unlock     *sql.Stmt // a held lock's row, deleted (Unlock)
}

// The statements' SQL.
const (
	stateSQL = `SELECT sid, version, length, base, base_from, base_to, own_from, turns, updated_at, seq_end, touched
		FROM session_heads WHERE id = ?`
	// insertWriteSQL inserts a write's row if its session (the last
	// parameter, its sid) is stored.
	insertWriteSQL = `INSERT INTO writes (key, version, length, base_from, base_to, own_from, turns, updated_at,
		pos, pos_end, seq, seq_end, messages, events, events_crc)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE sid = ?)`
	// updateSQL's parameters: the view's base, the status, set-summary
	// and summary, set-summary and its checksum, max turns (twice), the
	// same four for the title and for the first prompt, then sid. The metadata has a
	// statement of its own (metadataSQL, which also sets its labels
	// repo_id and agent): an UPDATE that names them rewrites the entries
	// of their indexes.
	updateSQL = `UPDATE sessions SET base = ?, status = coalesce(?, status),` + updateLeanSet
	// updateLeanSQL's parameters are updateSQL's without the base and
	// the status.
	updateLeanSQL = `UPDATE sessions SET` + updateLeanSet
	updateLeanSet = ` summary = iif(?, ?, summary), summary_crc = iif(?, ?, summary_crc),
		max_turns = iif(? > 0, ?, max_turns),
		title = iif(?, ?, title), title_crc = iif(?, ?, title_crc),
		first_prompt = iif(?, ?, first_prompt), first_prompt_crc = iif(?, ?, first_prompt_crc)
		WHERE sid = ?`
	metadataSQL = `UPDATE sessions SET metadata = ?, metadata_crc = ?, repo_id = ?, agent = ? WHERE sid = ?`
	// runUpdateSQL's parameters: status, updated_at, head, the number of
	// steps appended, the run's id; it returns the run's rid and its
	// number of steps after the update.
	// runCreateSQL's parameters: id, workflow, fingerprint, status,
	// created_at, updated_at, head, steps; it returns the new row's rid,
	// no row when the id is taken.
	runCreateSQL = `INSERT INTO runs (id, workflow, fingerprint, status, created_at, updated_at, head, steps)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING rid`
	runUpdateSQL = `UPDATE runs SET status = ?, updated_at = ?, head = ?, steps = steps + ? WHERE id = ? RETURNING rid, steps`
	runStepSQL   = `INSERT INTO run_steps (rid, pos, body) VALUES (?, ?, ?)`
	// touchSQL sets the minute of the session's last write (see
	// migration13).
	touchSQL = `UPDATE sessions SET touched = ? WHERE sid = ?`
	// versionSQL reads what Store.Refresh compares.
	versionSQL = `SELECT version, created_at FROM session_heads WHERE id = ?`
	// lockSQL takes a lock nobody holds; a lock with a row (held, or
	// left by a holder that died) takes TryLock's transaction.
	lockSQL   = `INSERT INTO locks (name, holder, host, pid, expires) VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`
	unlockSQL = `DELETE FROM locks WHERE name = ? AND holder = ?`
)

// statementSQL is a statement and its SQL.
type statementSQL struct {
	dst   **sql.Stmt
	query string
}

// list returns the statements with their SQL.
func (s *statements) list() []statementSQL {
	return []statementSQL{
		{&s.state, stateSQL},
		{&s.insertWrite, insertWriteSQL},
		{&s.update, updateSQL},
		{&s.updateLean, updateLeanSQL},
		{&s.runCreate, runCreateSQL},
		{&s.runUpdate, runUpdateSQL},
		{&s.runStep, runStepSQL},
		{&s.touch, touchSQL},
		{&s.version, versionSQL},
		{&s.lock, lockSQL},
		{&s.unlock, unlockSQL},
	}
}

// prepare prepares the statements (after the schema is migrated).
func (b *Backend) prepare(ctx context.Context) error {
	for _, p := range b.stmts.list() {
		stmt, err := b.db.PrepareContext(ctx, p.query)
		if err != nil {
			return err
		}
		*p.dst = stmt
	}
	return nil
}

// close closes the prepared statements.
func (s *statements) close() error {
	var errs []error
	for _, p := range s.list() {
		if *p.dst != nil {
			errs = append(errs, (*p.dst).Close())
		}
	}
	return errors.Join(errs...)
}
