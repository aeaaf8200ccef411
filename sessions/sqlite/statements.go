package sqlite

import (
	"context"
	"database/sql"
	"errors"
)

// statements are the Backend's prepared statements for the writes every
// agent loop step makes. database/sql prepares each once per connection
// and a transaction reuses it (sql.Tx.StmtContext), so a write compiles
// no SQL.
type statements struct {
	state         *sql.Stmt // a session's write state by id
	insertMessage *sql.Stmt
	insertEvent   *sql.Stmt
	update        *sql.Stmt // the session row after a Write
	// updateLean is update for a Write that changes neither the
	// session's status nor its view's base: it leaves the indexed
	// columns alone, so SQLite touches none of the sessions indexes
	// and the commit writes one page fewer per index (see
	// TestWritePages).
	updateLean *sql.Stmt
}

// The statements' SQL.
const (
	stateSQL         = `SELECT sid, version, length, base, base_from, base_to, own_from FROM sessions WHERE id = ?`
	insertMessageSQL = `INSERT INTO messages (sid, pos, body, crc) VALUES (?, ?, ?, ?)`
	insertEventSQL   = `INSERT INTO events (sid, seq, type, time, corr_id, data, pos) VALUES (?, ?, ?, ?, ?, ?, ?)`
	// updateSQL's parameters: the view's base, the status, the number
	// of changes, the rest of the view (base_from, base_to, own_from,
	// length), set-summary and summary, added turns, max turns (twice), set-title and title,
	// set-metadata and metadata, set-first-prompt and first prompt,
	// updated_at, then sid and the base version.
	updateSQL = `UPDATE sessions SET base = ?, status = coalesce(?, status),` + updateLeanSet
	// updateLeanSQL's parameters are updateSQL's without the base and
	// the status. SQLite rewrites the entries of every index on a column
	// an UPDATE assigns, even to the same value.
	updateLeanSQL = `UPDATE sessions SET` + updateLeanSet
	updateLeanSet = ` version = version + ?,
		base_from = ?, base_to = ?, own_from = ?, length = ?,
		summary = iif(?, ?, summary), turns = turns + ?,
		max_turns = iif(? > 0, ?, max_turns), title = iif(?, ?, title), metadata = iif(?, ?, metadata),
		first_prompt = iif(?, ?, first_prompt), updated_at = coalesce(?, updated_at)
		WHERE sid = ? AND version = ?`
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
		{&s.insertMessage, insertMessageSQL},
		{&s.insertEvent, insertEventSQL},
		{&s.update, updateSQL},
		{&s.updateLean, updateLeanSQL},
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
