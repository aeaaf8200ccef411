// Package sqlite is skein's embedded durable sessions.Backend: one SQLite
// file (by default .skein/sessions.db under the working directory) that
// several processes may share. It uses modernc.org/sqlite, a pure Go
// SQLite, so skein needs no cgo.
//
// # Opening
//
// Open creates the file's directory (0700) and the file (0600) when they
// are missing (SQLite gives its -wal and -shm files the same mode), gives a
// new database 8 KiB pages, puts it in WAL mode (readers never block the
// writer, and a process killed at any moment loses no committed write),
// sets busy_timeout (5 s), foreign keys and the durability level on
// every connection, and migrates the schema. The schema version is PRAGMA user_version: migration n
// moves it from n-1 to n inside one transaction, so reopening is a no-op
// and two processes opening a new file at once migrate it once (the
// check of the file's header and schema reads them in one transaction,
// and the switch to WAL, which SQLite refuses at once while another
// opener holds a lock, is retried for up to BusyTimeout). A file whose
// version is newer than this skein knows is refused, as is a file that
// is some other application's database (PRAGMA application_id).
//
// OpenLazy returns a Lazy backend instead, which is what the CLI uses: it
// opens the file only when a call needs it and creates it only with the
// first session (or run record) it stores, answering reads as an empty
// store until the file exists, so a process that stores nothing leaves no
// file and pays nothing to open one.
//
// A file or directory that cannot be written fails Open with ErrReadOnly,
// saying which of the two it is (SQLite says only "unable to open database
// file"). ReadOnly opens a database for reading only (the CLI's sessions
// ls, show and export, and runs): nothing is created or migrated, and a
// read-only file or directory can be read; when SQLite cannot create the
// -shm file there and no -wal file exists, the file is opened immutable.
//
// # Durability
//
// WithDurability picks what a commit survives. DurabilityProcess (the
// default) is synchronous=NORMAL: a commit is written to the WAL file
// when it returns, and the WAL is fsynced only at checkpoints, so a
// crashed or killed process loses nothing it committed, while an
// operating system crash or a power cut may lose the last commits (the
// database stays consistent: SQLite rolls back to the last synced
// transaction). DurabilityFull is synchronous=FULL: every commit is
// fsynced before it returns. The store commits an agent loop's events a
// step at a time (sessions.Store.Stage), so full costs one fsync per
// iteration whose tools are quick and two per other tool-calling
// iteration.
//
// Commits do not checkpoint the WAL themselves (wal_autocheckpoint=0): a
// writable Backend runs SQLite's passive checkpoints on a goroutine of
// its own once about 1,000 pages are written, and a write checkpoints
// itself only when the goroutine has fallen 4,000 pages behind (see
// checkpoint.go). Closing the last connection checkpoints the rest.
//
// # Schema (version 14)
//
//	sessions  sid (INTEGER key) id (TEXT, unique) status created_at summary
//	          metadata (JSON) parent_id branched_at max_turns title
//	          first_prompt, and base: the frozen view the current view
//	          rests on (its other numbers are in the newest writes row);
//	          repo_id and agent, the metadata's "repoId" and "agent",
//	          written with it, in clear also when it is sealed (version
//	          14; computed from it in versions 10 to 13; indexed:
//	          ListFilter.RepoID and .Agent, and (repo_id, status)); summary_crc
//	          metadata_crc title_crc first_prompt_crc (version 12: the
//	          checksums of the payloads beside them, see Checksums);
//	          touched, the minute of the newest write's updated_at
//	          (version 13, indexed: the update-time filters; a write
//	          updates it when its minute is not the row's)
//	writes    one row per write (version 9): key (sid << 32 | version the
//	          write was made on + 2^31), the session's state after it
//	          (version length base_from base_to own_from turns
//	          updated_at), its message rows at positions [pos, pos_end)
//	          and its events with seqs in [seq, seq_end), as two blobs
//	          (messages, events; layouts in writerow.go), and
//	          events_crc, the events blob's checksum (version 12)
//	session_heads  view: every session with its newest writes row's state
//	session_text  FTS5 table (trigram tokenizer) of each session's id
//	          and label (title, else first prompt), kept by triggers;
//	          sealed labels are left out (version 14: ListFilter.Text)
//	views     vid sid base base_from base_to own_from  (frozen views)
//	runs, run_steps  workflow run records (version 4)
//	repos     id path created_at  skein serve's repositories (version 11)
//	locks     name holder host pid expires interrupt     key name
//	          cross-process locks (version 7, see NewLocker)
//
// A write, however many changes it has (an agent loop step commits
// several), is one row of table writes, and touches the sessions row
// only when it changes the session's own fields (its status, title,
// summary, first prompt, metadata, maximum turns or its view's base) or
// is the session's first write in a new minute (touched), so an append
// writes one page: the last leaf of table writes
// (TestWritePages). writes is a rowid table, not a WITHOUT ROWID one:
// its key is one integer, so a session's rows are in write order and the
// newest session's writes append at the end of the b-tree, where SQLite
// splits a full page by starting a new one; an index b-tree (what WITHOUT
// ROWID tables are) rebalances two or three pages at each split, which
// made a row of about 1 KB cost 2.4 pages a write instead of 1.3. The key's
// uniqueness is the version check: two writes made on one version have
// one key, and the second fails. writes has no foreign key (a parent's
// delete would scan the whole table for its rows, there being no index
// on the session): Delete deletes a session's range of keys, and a write
// inserts its row only if its session is stored. The statements every
// write runs are prepared once per connection.
//
// Migration 9 moved the message and event rows of earlier versions into
// rows of table writes, a session's rows at keys below its creation's
// (up to 1,024 messages and 1,024 events a row), and dropped tables
// messages and events and the state columns of sessions.
//
// Times are Unix nanoseconds, loaded in UTC (the zero time is stored as
// the smallest int64, so it sorts first); JSON uses skein's encodings
// (message.Message's MarshalJSON, internal/jsonvalue's Encode), which give every
// value back with its type. Indexes serve listing by status, parent,
// creation and update time, and the lookups foreign keys need.
//
// # Checksums
//
// SQLite checks no data of its own: a damaged page reads back as altered
// text. Every message therefore carries its body's checksum
// (sessions.Checksum, CRC-32C), computed once when the message is
// appended; every load of messages verifies it and fails with
// sessions.ErrCorrupt naming the session and the message's index instead
// of returning the altered message. A writes row whose blob does not
// parse fails the same way, naming the session row and the write's
// version. Rows written before version 6 had no checksum; migration 8
// computes them.
//
// Every other payload has its checksum too (version 12): the title,
// summary, first prompt and metadata of a sessions row in the column
// beside each (-1, rowstore.LegacySum, for a value stored before version
// 12, read unchecked), and a writes row's events blob (types, times,
// correlation ids, data) in events_crc (NULL before version 12). A
// mismatch fails the load with sessions.ErrCorrupt naming the session
// and the field.
//
// # Encryption at rest
//
// WithKey seals every payload the Backend writes with a store key
// (package storekey, AES-256-GCM): message bodies and event data become
// JSON strings holding the base64 of their envelopes (so they stay
// valid JSON, and the computed columns repo_id and agent read a sealed
// metadata as no object: NULL), and the title, summary, first prompt and
// metadata hold the base64 of theirs with no checksum (their checksum
// column NULL is what marks them sealed; GCM's tag checks them). Status,
// times, ids, parent, view and event types stay plain: the indexes and
// the view need them. A listing filtered on repo_id or agent with a key
// runs that filter in Go over the opened metadata (rowstore.List).
// Workflow run records' headers and steps are sealed the same way
// (they hold tasks and outputs). RotateKey seals everything anew with
// another key in one transaction, then vacuums the file and truncates
// its WAL.
//
// # Message ids
//
// A message's ID and CreatedAt are in its body, like its other fields:
// appending one costs no byte outside it. Migration 8 (a Go
// step, identifyMessages) rewrites the rows of earlier versions with an
// id derived from the row's (sid, pos), so a fork's shared rows keep one
// id, and the time of the "message" event that appended the row.
//
// # Messages are append-only; a session's messages are a view
//
// The layout below, how a Write's changes move the view, and the stored
// forms of records, events and messages are shared with package postgres
// (sessions/internal/rowstore); this package holds the SQLite statements.
//
// Each session appends its own message rows at positions 0, 1, 2, ...
// (each write's rows are in its writes row) and never rewrites or
// deletes one while the session exists. What the session currently holds
// is a view described by four numbers, base in its sessions row and the
// others in its newest writes row:
//
//	messages = base[base_from:base_to] ++ own rows from own_from on
//
// where base, if not NULL, is a frozen view: a views row with the same
// shape (a base of its own and an owner's rows from own_from on), which
// nothing ever changes. So:
//
//   - Append stores the new rows at the next positions: O(appended).
//   - DropFirst (trim) moves base_from, or drops the base and moves
//     own_from: no message row is written.
//   - Replace (reset, compaction) starts the own part at the next free
//     position and inserts the replacement messages there: O(replacement).
//   - Fork writes O(1) rows whatever the length: the child's sessions
//     row, with base pointing at a new frozen copy of the source's view
//     (one views row; none at all when the kept messages lie inside the
//     source's own base, which the child then shares directly), and a
//     writes row for each of the two, with its fork event. The source's
//     later appends land after the child's base_to;
//     its trims and resets change only its own row. Neither can reach
//     the child, and the child's writes cannot reach the source.
//
// Load walks the chain of bases (one step per fork generation that the
// view still reaches into), turns it into row ranges of the owners, and
// reads each range in position order: the writes rows of the owner whose
// positions overlap it (SQLite reads a row's blobs only for those). Decoding the JSON is most of the
// cost of loading a long session, so it runs on every core while the rows
// are read.
//
// A frozen view is deleted when nothing references it any more (its fork
// was deleted, or trimmed or reset past it); message rows stay while their
// session exists, as the history the event log describes, and go with it.
//
// # History and partial loads
//
// A Write whose events hold one "message" event per appended message (as
// the store logs them) stores, in each such event's pos, the position of
// the message row it appended; LoadAppended matches them, so an export
// shows the message of every "message" event, also after a trim, reset
// or compaction dropped it from the current view (sessions.HistoryBackend).
// CreateWithHistory stores such messages as rows before the current ones.
// Events of version 1 have no pos.
//
// LoadTranscript is Load without the event log, which is as long as the
// transcript and costs as much to read; the store resumes sessions with
// it and reads the log with LoadEvents only for a snapshot
// (sessions.PartialLoader).
//
// # Writes, versions and processes
//
// Every Write, Fork, Create and Delete is one IMMEDIATE transaction: it
// takes SQLite's write lock before reading, checks the session's version
// against the caller's base (ErrConflict, with nothing written, when
// another writer got there first) and stores the write's row, keyed by
// that version. A Write that follows the same Backend's previous write of
// the session takes the state that write left instead of reading it:
// when another writer was there meanwhile, the row's key is taken (or
// the session is gone), so it rolls back, having written nothing, and
// starts over reading the state. Such a write runs on a connection the
// Backend keeps for it, with prepared statements of its own; when it is
// only its row (it changes none of the session's own fields, as an
// append does not), the INSERT runs alone, as its own transaction, which
// takes the write lock (waiting for it as BEGIN IMMEDIATE does) and
// commits, sparing the BEGIN and COMMIT statements. A begun write runs to its commit
// without its context's cancellation (the driver would watch each
// statement with a goroutine of its own); a cancelled context stops a
// write before it begins. Writes through one Backend queue on a mutex;
// other Backends and processes on the same file wait for the lock up to
// busy_timeout. Two processes writing one session therefore never
// interleave: the second gets sessions.ErrConflict. Loads run in read
// transactions and see one consistent state.
//
// A lock (NewLocker) is taken or released by one statement on the
// write connection, which waits up to a millisecond for the Backend's
// next write there to run it in its transaction (after the write's own
// statements: a write that fails leaves it waiting), else commits with
// the other lock statements waiting then: a commit of its own would
// cost far more than the statement (see carry.go). TryLock and Unlock
// return once their statement is committed.
//
// # Deleting
//
// Delete refuses a session that has forks (sessions.ErrHasChildren)
// unless recursive, which deletes the whole subtree in one transaction.
// A fork's shared messages therefore never lose their rows: no session
// can go while a fork of it is stored, and the foreign keys on every base
// reference would refuse it anyway.
package sqlite
