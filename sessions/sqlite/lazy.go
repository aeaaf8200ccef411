package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// Lazy is a sessions.Backend over the SQLite file at a path that is
// opened only when a call needs it and created only by a write: a
// process that never touches a session opens nothing, and one that only
// reads leaves no file behind. Until the file exists, reads answer as an
// empty store (Load: ErrNotFound, List: nothing); a file another process
// creates meanwhile is opened by the next call. The first call that
// creates a session, a run or a repository record (Create,
// CreateWithHistory, CreateRun, CreateRepo, PutRepo) opens the file as Open does, creating it and its
// directory; an error opening it (a file that is not a session
// database, a directory that cannot be made) is that call's error, and
// the next call tries again.
//
// Lazy is safe for concurrent use.
type Lazy struct {
	path string
	opts []Option

	mu sync.Mutex
	b  *Backend // nil until opened
}

var (
	_ sessions.Backend         = (*Lazy)(nil)
	_ sessions.PartialLoader   = (*Lazy)(nil)
	_ sessions.HistoryBackend  = (*Lazy)(nil)
	_ sessions.RunBackend      = (*Lazy)(nil)
	_ sessions.RunWriteBackend = (*Lazy)(nil)
	_ sessions.RepoBackend     = (*Lazy)(nil)
	_ sessions.VersionReader   = (*Lazy)(nil)
)

// OpenLazy returns a Lazy backend for path with Open's options. It
// checks the options and touches no file.
func OpenLazy(path string, opts ...Option) (*Lazy, error) {
	if _, _, err := configure(path, opts); err != nil {
		return nil, err
	}
	return &Lazy{path: path, opts: opts}, nil
}

// Path is the database file's path as given to OpenLazy.
func (l *Lazy) Path() string { return l.path }

// Opened reports whether the file has been opened.
func (l *Lazy) Opened() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b != nil
}

// OpenExisting opens the file now if it exists, so that a file that is
// not a session database is reported before the first call needs it.
// It creates nothing.
func (l *Lazy) OpenExisting() error {
	_, err := l.backend(false)
	return err
}

// OpenError is the error of a Lazy call that needed the file and could
// not open or create it: Open's error.
type OpenError struct {
	Path string
	Err  error
}

func (e *OpenError) Error() string { return e.Err.Error() }

func (e *OpenError) Unwrap() error { return e.Err }

// backend returns the open backend. With create it opens the file,
// creating it if missing; without, it returns nil (and no error) while
// the file does not exist.
func (l *Lazy) backend(create bool) (*Backend, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b != nil {
		return l.b, nil
	}
	if !create && !fileExists(l.path) {
		return nil, nil
	}
	b, err := Open(l.path, l.opts...)
	if err != nil {
		return nil, &OpenError{Path: l.path, Err: err}
	}
	l.b = b
	return b, nil
}

// fileExists reports whether path may name an existing file: false when it
// or a directory on the way to it is missing (or is a file).
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR)
}

// Durable reports true: sessions outlive the process.
func (l *Lazy) Durable() bool { return true }

// Create opens (creating) the file and stores the session.
func (l *Lazy) Create(ctx context.Context, rec *sessions.Record) error {
	b, err := l.backend(true)
	if err != nil {
		return err
	}
	return b.Create(ctx, rec)
}

// CreateWithHistory opens (creating) the file and stores the session
// with its history.
func (l *Lazy) CreateWithHistory(ctx context.Context, rec *sessions.Record, appended map[int64]message.Message) error {
	b, err := l.backend(true)
	if err != nil {
		return err
	}
	return b.CreateWithHistory(ctx, rec, appended)
}

// CreateRun opens (creating) the file and stores the run.
func (l *Lazy) CreateRun(ctx context.Context, rec *sessions.RunRecord) error {
	b, err := l.backend(true)
	if err != nil {
		return err
	}
	return b.CreateRun(ctx, rec)
}

// Load returns the session, ErrNotFound while the file does not exist.
func (l *Lazy) Load(ctx context.Context, id string) (*sessions.Record, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, orNotFound(id, err)
	}
	return b.Load(ctx, id)
}

// LoadMeta is Load without messages and events.
func (l *Lazy) LoadMeta(ctx context.Context, id string) (*sessions.Record, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, orNotFound(id, err)
	}
	return b.LoadMeta(ctx, id)
}

// StoredVersion reads the session's version and creation time as
// Backend.StoredVersion does (ErrNotFound while the file does not exist).
func (l *Lazy) StoredVersion(ctx context.Context, id string) (int64, time.Time, error) {
	b, err := l.backend(false)
	if b == nil {
		return 0, time.Time{}, orNotFound(id, err)
	}
	return b.StoredVersion(ctx, id)
}

// LoadTranscript is Load without the event log.
func (l *Lazy) LoadTranscript(ctx context.Context, id string) (*sessions.Record, int64, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, 0, orNotFound(id, err)
	}
	return b.LoadTranscript(ctx, id)
}

// LoadEvents returns the session's event log.
func (l *Lazy) LoadEvents(ctx context.Context, id string) ([]sessions.Event, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, orNotFound(id, err)
	}
	return b.LoadEvents(ctx, id)
}

// LoadAppended returns the messages the session's message events
// appended.
func (l *Lazy) LoadAppended(ctx context.Context, id string) (map[int64]message.Message, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, orNotFound(id, err)
	}
	return b.LoadAppended(ctx, id)
}

// Exists reports whether the session is stored (false while the file
// does not exist).
func (l *Lazy) Exists(ctx context.Context, id string) (bool, error) {
	b, err := l.backend(false)
	if b == nil {
		return false, err
	}
	return b.Exists(ctx, id)
}

// Write applies changes to a stored session (ErrNotFound while the file
// does not exist: there is no session to change).
func (l *Lazy) Write(ctx context.Context, id string, base int64, changes ...*sessions.Change) error {
	b, err := l.backend(false)
	if b == nil {
		return orNotFound(id, err)
	}
	return b.Write(ctx, id, base, changes...)
}

// WriteRun applies changes to a stored session and u to a stored run in
// one transaction (ErrNotFound while the file does not exist).
func (l *Lazy) WriteRun(ctx context.Context, id string, base int64, runID string, u *sessions.RunUpdate, changes ...*sessions.Change) error {
	b, err := l.backend(false)
	if b == nil {
		return orNotFound(id, err)
	}
	return b.WriteRun(ctx, id, base, runID, u, changes...)
}

// Fork forks a stored session (ErrNotFound while the file does not
// exist).
func (l *Lazy) Fork(ctx context.Context, spec *sessions.ForkSpec) error {
	b, err := l.backend(false)
	if b == nil {
		return orNotFound(spec.Src, err)
	}
	return b.Fork(ctx, spec)
}

// List lists the stored sessions (none while the file does not exist).
func (l *Lazy) List(ctx context.Context, f sessions.ListFilter) ([]sessions.Summary, int, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, 0, err
	}
	return b.List(ctx, f)
}

// Delete deletes a stored session (ErrNotFound while the file does not
// exist).
func (l *Lazy) Delete(ctx context.Context, id string, recursive bool) error {
	b, err := l.backend(false)
	if b == nil {
		return orNotFound(id, err)
	}
	return b.Delete(ctx, id, recursive)
}

// UpdateRun updates a stored run (ErrRunNotFound while the file does not
// exist).
func (l *Lazy) UpdateRun(ctx context.Context, id string, u *sessions.RunUpdate) error {
	b, err := l.backend(false)
	if b == nil {
		return orRunNotFound(err)
	}
	return b.UpdateRun(ctx, id, u)
}

// LoadRun returns a stored run (ErrRunNotFound while the file does not
// exist).
func (l *Lazy) LoadRun(ctx context.Context, id string) (*sessions.RunRecord, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, orRunNotFound(err)
	}
	return b.LoadRun(ctx, id)
}

// ListRuns lists the stored runs (none while the file does not exist).
func (l *Lazy) ListRuns(ctx context.Context, f sessions.RunFilter) ([]sessions.RunSummary, int, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, 0, err
	}
	return b.ListRuns(ctx, f)
}

// CreateRepo stores a new repository record, creating the file.
func (l *Lazy) CreateRepo(ctx context.Context, r *sessions.Repo) error {
	b, err := l.backend(true)
	if err != nil {
		return err
	}
	return b.CreateRepo(ctx, r)
}

// PutRepo stores or replaces a repository record, creating the file.
func (l *Lazy) PutRepo(ctx context.Context, r *sessions.Repo) error {
	b, err := l.backend(true)
	if err != nil {
		return err
	}
	return b.PutRepo(ctx, r)
}

// LoadRepo returns a repository record (ErrRepoNotFound while the file
// does not exist).
func (l *Lazy) LoadRepo(ctx context.Context, id string) (*sessions.Repo, error) {
	b, err := l.backend(false)
	if b == nil {
		if err == nil {
			err = sessions.ErrRepoNotFound
		}
		return nil, err
	}
	return b.LoadRepo(ctx, id)
}

// ListRepos lists the repository records (none while the file does not
// exist).
func (l *Lazy) ListRepos(ctx context.Context) ([]sessions.Repo, error) {
	b, err := l.backend(false)
	if b == nil {
		return nil, err
	}
	return b.ListRepos(ctx)
}

// DeleteRepo removes a repository record (ErrRepoNotFound while the file
// does not exist).
func (l *Lazy) DeleteRepo(ctx context.Context, id string) error {
	b, err := l.backend(false)
	if b == nil {
		if err == nil {
			err = sessions.ErrRepoNotFound
		}
		return err
	}
	return b.DeleteRepo(ctx, id)
}

// Close closes the file if it was opened.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b == nil {
		return nil
	}
	err := l.b.Close()
	l.b = nil
	return err
}

// orNotFound is err, or ErrNotFound for session id when there is none
// (the file does not exist).
func orNotFound(id string, err error) error {
	if err != nil {
		return err
	}
	return sessions.IDError(id, sessions.ErrNotFound)
}

// orRunNotFound is err, or ErrRunNotFound when there is none.
func orRunNotFound(err error) error {
	if err != nil {
		return err
	}
	return sessions.ErrRunNotFound
}
