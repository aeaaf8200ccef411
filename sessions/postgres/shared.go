package postgres

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// The objects of this file serve the processes that share the database
// at run time (replicas of skein serve): the cross-process locks and the
// notifications of new events. They live in skein's schema beside the
// tables of the migrations and are made, idempotently, by the first
// process that needs them (sharedSchema); a database no server has used
// has none, and its writes pay nothing for them.

// sharedSchema makes the shared objects if they are missing:
//
//   - table skein_locks: one row per lock held through a Locker (its name,
//     its holder's token, and the reason another holder asked for it);
//     the lock itself is a session-level advisory lock of the holder's
//     connection, which the server releases when the connection ends;
//   - trigger skein_events_notify on skein_events: every statement that
//     appends events notifies, in its transaction (so at its commit),
//     channel eventChannel(schema, sid) of each session it appended to
//     (sid: the session's row id, so the trigger reads no other table),
//     with the seq of the newest event as the payload.
const sharedSchema = `
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

CREATE OR REPLACE TRIGGER skein_events_notify AFTER INSERT ON skein_events
	REFERENCING NEW TABLE AS skein_new_events
	FOR EACH STATEMENT EXECUTE FUNCTION skein_notify_events();
`

// ensureShared makes the shared objects (sharedSchema) unless they
// exist, under an advisory lock so that concurrent processes make them
// once, and returns the schema's name.
func (b *Backend) ensureShared(ctx context.Context) (string, error) {
	var schema string
	err := b.inTx(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return err
		}
		var ready bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass('skein_locks') IS NOT NULL AND EXISTS (
				SELECT 1 FROM pg_trigger WHERE tgname = 'skein_events_notify' AND tgrelid = 'skein_events'::regclass)`).Scan(&ready); err != nil || ready {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('skein shared ' || current_schema(), 0))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sharedSchema)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("postgres: %s: locks and notifications: %w", b.dsn, err)
	}
	return schema, nil
}

// eventChannel is the notification channel of the new events of the
// session whose row id is sid in schema (as the trigger of sharedSchema
// names it).
func eventChannel(schema string, sid int64) string {
	sum := md5.Sum([]byte(schema + "/" + strconv.FormatInt(sid, 10)))
	return "skein_" + hex.EncodeToString(sum[:])
}
