// Package postgres is skein's shared durable sessions.Backend: sessions,
// their events and workflow run records in a PostgreSQL database (14 or
// newer) that any number of skein processes, on any number of machines,
// use at once. It uses github.com/jackc/pgx/v5 and its pool.
//
// It keeps the semantics of package sqlite, and the same layout (see
// package sessions/internal/rowstore): messages are append-only rows and
// a session's messages are a view over them, so a fork writes O(1) rows
// whatever the length; every write is committed before it returns; a
// session's version is checked on every write, so two writers never
// interleave and the second gets sessions.ErrConflict.
//
// # Opening
//
// Open takes a postgres:// (or postgresql://) URL. Its query may carry any
// libpq parameter pgx knows (sslmode, connect_timeout, application_name,
// ...), pgxpool's pool_max_conns, and search_path: skein's tables (all
// named skein_*) go in the first schema of the search path, which must
// exist (public by default). Errors and DSN show the URL with its password
// replaced by xxxxx (Redact).
//
// The schema is versioned: skein_migrations has a row per migration
// applied. Open only checks the version: it changes nothing in the
// schema, so skein can run as a role that may only read and write rows
// (see docs/security.md for the grants), and a schema without skein's
// tables or with an older version of them is an error that says to run
// `skein migrate` (ErrNeedsMigration). Migrate (skein migrate) creates
// and upgrades the tables in one transaction that first takes an
// advisory lock named after the schema, so concurrent migrations apply
// each migration once. A schema newer than this skein knows is refused
// (an older skein refuses a schema a newer one migrated).
//
// Every statement that appends events to a session notifies the
// session's channel (pg_notify, with the seq of the newest event as the
// payload) in its own transaction, so at its commit; NewNotifier
// listens. From migration 3 to 8 a trigger on skein_events
// (skein_events_notify, in PL/pgSQL) did it; migration 9 drops it, as
// the writes themselves notify (before migration 3 the first serve
// replica made the trigger itself, which needed the TRIGGER privilege at
// run time; skein_steps records it as step "notify"). A skein of schema
// version 8 or older that still runs when the schema is migrated to 9
// writes without notifying: the other replicas' streams then get its
// events by polling only (see docs/serve.md). Since migration 12 a
// statement notifies only while a listener other than its own Backend's
// notifiers is registered in skein_listeners (see NewNotifier): a
// process that is the only one listening is not woken by its own
// writes, whose events its streams get from the store's observer. A
// skein of version 11 or older that still runs after the migration
// listens unregistered: the newer writers' events reach its streams by
// polling only.
//
// # Durability
//
// A write returns once PostgreSQL has committed it. With the server's
// default synchronous_commit (on), the commit is then on the server's
// disk: neither a crash of skein nor one of the database server's machine
// loses it. DurabilityProcess (the default) keeps whatever the server is
// configured with; DurabilityFull sets synchronous_commit=on for skein's
// connections, so a server configured with it off still flushes skein's
// commits.
//
// # Schema (version 12)
//
//	skein_sessions  sid (identity) id status created_at updated_at summary
//	                metadata (JSON text) parent_id branched_at turns
//	                max_turns version title first_prompt, and the current
//	                view: base base_from base_to own_from length; repo_id
//	                and agent, the metadata's "repoId" and "agent",
//	                written with it, in clear also when it is sealed
//	                (migration 8; generated from it by migration 4;
//	                indexed: ListFilter.RepoID and .Agent, and (repo_id,
//	                status)); summary_crc
//	                metadata_crc title_crc first_prompt_crc (migration 6);
//	                meta, the metadata as jsonb, and touched, the minute
//	                of updated_at (both generated, migration 7; touched
//	                indexed: the update-time filters); and, where the
//	                pg_trgm extension can be had, a trigram (GIN) index on
//	                lower(id) and lower(label), the label being the title,
//	                else the first prompt (step "trgm": ListFilter.Text)
//	skein_views     vid sid base base_from base_to own_from (frozen views)
//	skein_messages  sid pos body (JSON of message.Message) crc  key (sid, pos)
//	skein_events    sid seq type time corr_id data pos crc    key (sid, seq)
//	skein_runs, skein_run_steps  workflow run records
//	skein_repos     id path created_at: skein serve's repositories (migration 5)
//	skein_locks     name holder conn (interrupt, unused since migration
//	                11): the locks whose holders may leave work to repair
//	                (NewLocker)
//	skein_lock_interrupts  name hold reason: Interrupt's marks (migration 11)
//	skein_listeners key: the notifiers' listening connections (migration
//	                12; NewNotifier)
//	skein_migrations, skein_steps  the migrations and steps applied
//
// Times are Unix nanoseconds (bigint), so they round-trip exactly; JSON is
// stored as text in the encodings of package sessions, which give every
// value back with its type (and the bytes their checksums are of); the
// listings' metadata conditions (sessions.WhereCond) read column meta,
// the same metadata as jsonb, which PostgreSQL generates from the text
// (a sealed metadata is a JSON string there, which no condition on a key
// matches: with a key those conditions, and the text search, run in
// Go; repo_id and agent stay in SQL). Ids compare byte by byte (COLLATE "C"), as in SQLite, so
// a listing orders equal creation times the same way on both.
//
// # Checksums and encryption at rest
//
// Every payload is stored with its checksum (sessions.Checksum): a
// message body in crc, an event's data in crc, the title, summary, first
// prompt and metadata in the *_crc column beside each (migration 6; -1,
// rowstore.LegacySum, for a value stored before it, read unchecked). A
// mismatch fails the load with sessions.ErrCorrupt naming the session and
// the field. WithKey seals every payload with a store key (package
// storekey, AES-256-GCM) instead, as package sqlite does (see its doc):
// message bodies, event data, metadata and workflow run records' headers
// and steps become JSON strings of the
// base64 of their envelopes, the text payloads the base64 itself, with no
// checksum (a sealed message row's crc is 0 and unused). RotateKey seals
// everything anew in one transaction that locks skein's tables against
// writes.
//
// # Writes, versions and processes
//
// A Write that freezes and releases no frozen view (appends, injects,
// trims within the session's own rows, resets and compactions of a
// session that shares no prefix: every write an agent loop makes) reads
// the session's state and then runs one statement: an UPDATE of the
// session row WHERE its row id and version are still the ones read, and,
// in the same statement, the INSERTs of the new message and event rows,
// which insert nothing when the UPDATE matched no row. The UPDATE
// assigns only the columns the write changes (an inject: the version,
// the view and updated_at), so column meta is not generated again from
// an unchanged metadata and, as no indexed column changes but touched
// (once a minute), the update is HOT: no index gets a new entry. A write that lost
// to another gets sessions.ErrConflict with nothing written: PostgreSQL
// re-checks the version after waiting for the other writer's lock. The
// Backend remembers the state of each session it last loaded, created or
// wrote, so the next write at that version skips the read: one round
// trip and one commit per loop step. The remembered state is a guess the
// statement checks (a row id and a version name one state for ever); a
// write whose guess was stale reads the state and tries once more. Other
// writes (a
// rewind that freezes a view, a trim or reset that releases one), Create,
// Fork and Delete run in a read-committed transaction that locks the
// session's row (SELECT ... FOR UPDATE) before checking its version. A
// Create with a parent also holds an advisory lock while it checks that
// the parent chain does not lead back to the new id, so two creates
// cannot close a cycle between them. Loads run in repeatable-read
// read-only transactions and see one consistent state.
//
// # Deleting
//
// Delete refuses a session that has forks (sessions.ErrHasChildren)
// unless recursive, which deletes the whole subtree in one transaction;
// the foreign keys on every base reference refuse a delete that would
// leave a fork without its shared messages. A session's message and
// event rows go with its row: trigger skein_sessions_delete (migration
// 10) deletes them once per DELETE statement on skein_sessions, whoever
// runs it. They have no foreign key (it was checked once per inserted
// row, a quarter of a write's cost in the database): skein inserts them
// only from the write that updated the session's row and holds it
// locked (from the UPDATE's RETURNING, so none if the row is gone), or
// in the transaction that created or locked it. Two writes that each drop
// the last reference to a frozen view at the same moment may both keep
// it: an unused views row stays, never a used one goes.
package postgres
