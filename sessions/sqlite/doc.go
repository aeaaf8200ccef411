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
// # Schema (version 8)
//
//	sessions  sid (INTEGER key) id (TEXT, unique) status created_at updated_at
//	          summary metadata (JSON) parent_id branched_at turns max_turns
//	          version, the current view: base base_from base_to own_from,
//	          and length (the current message count, for cheap listings);
//	          title first_prompt (version 3)
//	views     vid sid base base_from base_to own_from  (frozen views)
//	messages  sid pos body (JSON of sessions.Message)   key (sid, pos)
//	          crc: sessions.Checksum of body (version 6)
//	          body holds the message's id and created_at (version 8)
//	events    sid seq type time corr_id data (JSON)      key (sid, seq)
//	          pos: a "message" event's message row (version 2)
//	runs, run_steps  workflow run records (version 4)
//	locks     name holder host pid expires interrupt     key name
//	          cross-process locks (version 7, see NewLocker)
//
// messages and events are WITHOUT ROWID tables (version 5): rows are
// stored in key order in one b-tree, so an append changes one page of
// each, and a write of a loop step writes a handful of WAL frames (the
// sessions row, the messages and events leaves it appended to, and the
// b-tree pages above them when a leaf splits). A write that keeps the
// session's status and its view's base does not assign their columns,
// so it rewrites no entry of the sessions indexes: an appended message
// writes three pages (TestWritePages). The statements every write runs
// are prepared once per connection.
//
// Times are Unix nanoseconds, loaded in UTC (the zero time is stored as
// the smallest int64, so it sorts first); JSON uses skein's encodings
// (sessions.Message's MarshalJSON, internal/jsonvalue's Encode), which give every
// value back with its type. Indexes serve listing by status, parent,
// creation and update time, and the lookups foreign keys need.
//
// # Checksums
//
// SQLite checks no data of its own: a damaged page reads back as altered
// text. Every message row therefore carries its body's checksum
// (sessions.Checksum, CRC-32C), computed once when the message is
// appended; every load of message rows verifies it and fails with
// sessions.ErrCorrupt naming the session and the message's index instead
// of returning the altered message. Rows written before version 6 had no
// checksum; migration 8 computes them.
//
// # Message ids
//
// A message's ID and CreatedAt are in its body, like its other fields:
// appending one costs no statement and no column more. Migration 8 (a Go
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
// Each session appends its own messages to the messages table at
// positions 0, 1, 2, ... and never rewrites or deletes one while the
// session exists. What the session currently holds is a view described by
// four numbers in its sessions row:
//
//	messages = base[base_from:base_to] ++ own rows from own_from on
//
// where base, if not NULL, is a frozen view: a views row with the same
// shape (a base of its own and an owner's rows from own_from on), which
// nothing ever changes. So:
//
//   - Append inserts the new rows at the next positions: O(appended).
//   - DropFirst (trim) moves base_from, or drops the base and moves
//     own_from: no message row is written.
//   - Replace (reset, compaction) starts the own part at the next free
//     position and inserts the replacement messages there: O(replacement).
//   - Fork writes O(1) rows whatever the length: the child's row, with
//     base pointing at a new frozen copy of the source's view (one views
//     row; none at all when the kept messages lie inside the source's
//     own base, which the child then shares directly), plus the two fork
//     events. The source's later appends land after the child's base_to;
//     its trims and resets change only its own row. Neither can reach
//     the child, and the child's writes cannot reach the source.
//
// Load walks the chain of bases (one step per fork generation that the
// view still reaches into), turns it into row ranges of the owners, and
// reads each range in position order. Decoding the JSON is most of the
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
// the message row it appended; LoadAppended joins them, so an export
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
// another writer got there first) and bumps it. A Write that follows
// the same Backend's previous write of the session takes the state that
// write left instead of reading it, and updates the session's row first,
// on the condition that its sid and version are that state's; when they
// are not (another writer was there), it rolls back, having written
// nothing, and starts over reading the row. Such a write runs on a
// connection the Backend keeps for it, with BEGIN IMMEDIATE and COMMIT as
// prepared statements of its own. A begun write runs to its commit
// without its context's cancellation (the driver would watch each
// statement with a goroutine of its own); a cancelled context stops a
// write before it begins. Writes through one Backend queue on a mutex;
// other Backends and processes on the same file wait for the lock up to
// busy_timeout. Two processes writing one session therefore never
// interleave: the second gets sessions.ErrConflict. Loads run in read
// transactions and see one consistent state.
//
// # Deleting
//
// Delete refuses a session that has forks (sessions.ErrHasChildren)
// unless recursive, which deletes the whole subtree in one transaction.
// A fork's shared messages therefore never lose their rows: no session
// can go while a fork of it is stored, and the foreign keys on every base
// reference would refuse it anyway.
package sqlite
