package sessions

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/skein-dev/skein/sessions/message"
)

// Status is a session's lifecycle state.
type Status string

// Session statuses.
const (
	StatusActive    Status = "active"    // open, accepting work
	StatusCompleted Status = "completed" // closed by the script (agent_session_close)
	StatusCancelled Status = "cancelled" // its agent loop was cancelled by the user
	StatusError     Status = "error"     // its agent loop failed fatally
)

// Statuses lists every status in sorted order.
var Statuses = []Status{StatusActive, StatusCancelled, StatusCompleted, StatusError}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	for _, x := range Statuses {
		if s == x {
			return true
		}
	}
	return false
}

// Errors returned by backends and the store. Callers test them with
// errors.Is; the store wraps them with the session id.
var (
	ErrNotFound = errors.New("unknown session id")
	ErrExists   = errors.New("session already exists")
	// ErrConflict means the stored session changed since it was loaded
	// (another process wrote to it); nothing was written.
	ErrConflict = errors.New("modified by another process")
	// ErrHasChildren means a delete was refused because forks of the
	// session exist.
	ErrHasChildren = errors.New("session has children")
	// ErrCycle means a session's parents lead back to it: Create refuses
	// such a record, and a lineage walk that meets a cycle stored by an
	// older version stops with it.
	ErrCycle = errors.New("fork cycle")
)

// Record is the complete stored state of one session: what a Backend
// loads and what a snapshot shows.
type Record struct {
	ID        string
	Status    Status
	CreatedAt time.Time
	UpdatedAt time.Time
	// Title is the session's title, "" when it has none.
	Title    string
	Messages []message.Message
	Events   []Event
	Summary  *string
	// Metadata is the session's free-form JSON object (repo, user,
	// context, parent_session_id of a fork), nil when empty.
	Metadata map[string]any
	// FirstPrompt is derived from Messages and kept by the store: the
	// first line of the first user message's text, at most
	// FirstPromptLen characters; "" when there is no user message.
	// Listings show it when Title is empty (see Summary.Label).
	FirstPrompt string
	ParentID    string
	ChildIDs    []string
	BranchedAt  *int
	Turns       int
	MaxTurns    int // 0: the VM's default cap
	// Version counts committed writes; a backend refuses a Write whose base
	// version is not the stored one (ErrConflict).
	Version int64
}

// Change is one atomic write to a session. A backend applies it all or
// nothing, in this order: Replace or DropFirst or DropLast, then Append,
// Events, Summary, Status, AddTurns, MaxTurns, Title, Metadata,
// FirstPrompt, UpdatedAt.
type Change struct {
	// Replace, when true, makes ReplaceWith the whole current message list
	// (reset, compaction). The previous messages stay in history only
	// through the event log.
	Replace     bool
	ReplaceWith []message.Message
	// DropFirst removes that many messages from the front of the current
	// message list (trim).
	DropFirst int
	// DropLast removes that many messages from the end of the current
	// message list (rewind). A backend that keeps history keeps them in it.
	// It is ignored when Replace is set and may not be combined with
	// DropFirst.
	DropLast int
	Append   []message.Message
	// Events are appended to the log; they arrive sequenced and stamped.
	Events []Event
	// SetSummary, when true, sets the running summary to Summary (nil clears).
	SetSummary bool
	Summary    *string
	// Status, when not empty, becomes the session's status.
	Status   Status
	AddTurns int
	// MaxTurns, when > 0, becomes the session's turn cap.
	MaxTurns int
	// SetTitle, when true, sets the title to Title ("" clears it).
	SetTitle bool
	Title    string
	// SetMetadata, when true, makes Metadata the whole metadata object
	// (nil clears it); the store merges updates before writing.
	SetMetadata bool
	Metadata    map[string]any
	// SetFirstPrompt, when true, sets the derived FirstPrompt (the store
	// sets it when the first user message changes).
	SetFirstPrompt bool
	FirstPrompt    string
	// UpdatedAt is the time of the write (set by the store).
	UpdatedAt time.Time
}

// ForkSpec describes a fork for Backend.Fork: a new session Dst whose
// messages are the first KeepFirst messages of Src's current list, shared
// rather than copied, plus a write to Src recording the fork.
type ForkSpec struct {
	Src        string
	SrcVersion int64 // Src's version the fork was taken from (ErrConflict if stale)
	SrcEvent   Event // the fork event appended to Src's log
	SrcTime    time.Time
	KeepFirst  int
	// Dst is the new session's record: its Messages must be empty (they
	// come from Src) and its Version 0.
	Dst Record
}

// ListFilter selects sessions for Backend.List. Zero fields do not filter.
type ListFilter struct {
	Statuses []Status
	ParentID string
	// CreatedAfter and UpdatedAfter keep the sessions created (last
	// updated) at or after the time; CreatedBefore and UpdatedBefore
	// those created (last updated) strictly before it.
	CreatedAfter, CreatedBefore time.Time
	UpdatedAfter, UpdatedBefore time.Time
	// RepoID and Agent, when set, keep the sessions whose metadata has
	// that string under "repoId" and "agent" (skein serve's keys). The
	// durable backends read them from indexed columns.
	RepoID, Agent string
	// HasAgent keeps the sessions whose metadata has a non-empty string
	// under "agent": the sessions skein serve created (it counts them
	// against --max-sessions). The durable backends count them from the
	// indexed column, without reading the sessions.
	HasAgent bool
	// Conds keeps the sessions that meet every condition (see
	// WhereCond; ListWhere puts a filter expression's there).
	Conds []WhereCond
	// Text keeps the sessions whose id or title (the first prompt when
	// the title is empty) contains it, ignoring case (skein serve's q).
	// Backends fold ASCII letters at least: ListWhere filters a Text
	// with other characters in Go.
	Text string
	// After, when set, keeps the sessions that come after it in the
	// listing's order: the next page after a page whose last session
	// it is (keyset paging, which costs the same at any depth, unlike
	// Offset).
	After *ListCursor
	// CountLimit > 0 stops counting the matches at that many: the total
	// List returns is then min(matches, CountLimit), and costs at most
	// that many index entries to count.
	CountLimit int
	Limit      int // 0: no limit
	Offset     int
}

// ListCursor is a place in a listing: a session's creation time and id,
// the listing's order (newest first, then id descending).
type ListCursor struct {
	CreatedAt time.Time
	ID        string
}

// String returns c as an opaque token: its creation time (Unix
// nanoseconds) and id, base64url-encoded. skein serve's nextCursor and
// skein sessions ls --cursor are such tokens; ParseCursor reads one.
func (c *ListCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "/" + c.ID))
}

// ErrBadCursor is ParseCursor's error for a token that ListCursor.String
// did not write.
var ErrBadCursor = errors.New("not a cursor of a listing (a nextCursor or next_cursor of a page)")

// ParseCursor reads a token of ListCursor.String (ErrBadCursor).
func ParseCursor(v string) (*ListCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, ErrBadCursor
	}
	ns, id, ok := strings.Cut(string(raw), "/")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || CheckID(id) != nil {
		return nil, ErrBadCursor
	}
	return &ListCursor{CreatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}

// CursorOf returns the place of s in a listing.
func CursorOf(s *Summary) *ListCursor { return &ListCursor{CreatedAt: s.CreatedAt, ID: s.ID} }

// Before reports whether s comes after c in a listing (newest first,
// then id descending): whether a listing with After c keeps it.
func (c *ListCursor) Before(createdAt time.Time, id string) bool {
	return createdAt.Before(c.CreatedAt) || createdAt.Equal(c.CreatedAt) && id < c.ID
}

// Summary is one row of a session listing: no message bodies.
type Summary struct {
	ID          string
	Status      Status
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ParentID    string
	Length      int
	Turns       int
	Children    int
	Title       string
	FirstPrompt string
	Metadata    map[string]any
}

// Backend stores sessions. Implementations must be safe for concurrent use
// and must apply every call atomically: after an error nothing of that
// call is visible. A backend stores messages as they are given, their ID
// and CreatedAt included (the store sets both; a time may come back in
// another location), and mints nothing itself.
type Backend interface {
	// Durable reports whether sessions survive their eviction from the
	// store (and the process). The store deletes an evicted session from
	// a backend that is not durable.
	Durable() bool
	// Create stores a new session (ErrExists if the id is taken).
	Create(ctx context.Context, rec *Record) error
	// Load returns the session's full state (ErrNotFound).
	Load(ctx context.Context, id string) (*Record, error)
	// LoadMeta is Load without Messages and Events: cheap lineage and
	// status lookups.
	LoadMeta(ctx context.Context, id string) (*Record, error)
	// Exists reports whether the id is stored.
	Exists(ctx context.Context, id string) (bool, error)
	// Write applies changes to the session, in order, if its stored
	// version is base, and bumps the version once per change (ErrNotFound,
	// ErrConflict). All of them are one atomic write (one transaction, one
	// commit): after an error none is visible. The store writes a loop
	// step's changes together this way (see Store.Stage).
	Write(ctx context.Context, id string, base int64, changes ...*Change) error
	// Fork creates spec.Dst sharing Src's first KeepFirst messages and
	// records the fork on Src (ErrNotFound, ErrExists, ErrConflict).
	Fork(ctx context.Context, spec *ForkSpec) error
	// List returns the matching sessions, newest first, and the total
	// number that match before Limit and Offset (up to CountLimit).
	List(ctx context.Context, f ListFilter) ([]Summary, int, error)
	// Delete removes a session; ErrHasChildren if it has forks, unless
	// recursive, which deletes them too. A fork's shared messages stay
	// readable after its parent is deleted.
	Delete(ctx context.Context, id string, recursive bool) error
	// Close releases the backend's resources.
	Close() error
}

// PartialLoader is implemented by durable backends that can load a
// session in parts. Resuming a session needs its transcript but not its
// event log, which is as long as the transcript (a "message" event per
// message) and is read only by snapshots; the store resumes with
// LoadTranscript and reads the log with LoadEvents when a snapshot asks
// for it.
type PartialLoader interface {
	// LoadTranscript returns the session's state without its event log
	// (Events nil) and the seq of its newest event, 0 for an empty log
	// (ErrNotFound).
	LoadTranscript(ctx context.Context, id string) (*Record, int64, error)
	// LoadEvents returns the session's event log, oldest first
	// (ErrNotFound).
	LoadEvents(ctx context.Context, id string) ([]Event, error)
}

// VersionReader is implemented by durable backends that can read a
// session's stored version and creation time alone, in one statement:
// Store.Refresh (run before every read and turn of skein serve) uses it
// instead of LoadMeta.
type VersionReader interface {
	// StoredVersion returns the session's Version and CreatedAt as
	// stored (ErrNotFound).
	StoredVersion(ctx context.Context, id string) (version int64, created time.Time, err error)
}

// HistoryBackend is implemented by durable backends that keep every
// message appended to a session after it left the current message list
// (trimmed, reset or compacted away), so that an export can show, for
// every "message" event of the log, the message it appended: a complete
// audit trail.
//
// A Write pairs them: when the Change's Events hold exactly one event of
// type EventMessage per message of Append, the k'th such event records
// Append[k] (the store logs them so). Other writes record nothing.
type HistoryBackend interface {
	// LoadAppended returns the messages the session's "message" events
	// appended, by the events' seq. An event whose message the backend
	// did not record (see above) has no entry (ErrNotFound).
	LoadAppended(ctx context.Context, id string) (map[int64]message.Message, error)
	// CreateWithHistory is Create that also records appended, messages
	// by the seq of a "message" event of rec.Events, as LoadAppended
	// returns them; an import restores an exported history with it. A
	// seq that names no "message" event of rec is an error.
	CreateWithHistory(ctx context.Context, rec *Record, appended map[int64]message.Message) error
}
