package rowstore

import (
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// Fork is a sessions.ForkSpec in its stored form.
type Fork struct {
	Spec *sessions.ForkSpec
	// Dst is the new session, its ParentID set to the source.
	Dst       sessions.Record
	Row       *SessionRow
	DstEvents []EventRow
	SrcEvents []EventRow // the fork event on the source
	SrcTime   *int64     // the source's new updated_at, nil to keep it
}

// EncodeFork checks spec and returns its stored form: Dst's Messages and
// ChildIDs must be empty and its ParentID empty or Src.
func EncodeFork(k *storekey.Key, spec *sessions.ForkSpec) (*Fork, error) {
	f := &Fork{Spec: spec, Dst: spec.Dst}
	dst := &f.Dst
	if len(dst.Messages) > 0 {
		return nil, fmt.Errorf("fork of %q: new session %q must not carry messages (they come from its source)", spec.Src, dst.ID)
	}
	if dst.ParentID != "" && dst.ParentID != spec.Src {
		return nil, fmt.Errorf("fork of %q: new session %q names another parent %q", spec.Src, dst.ID, dst.ParentID)
	}
	dst.ParentID = spec.Src
	if err := CheckNoChildren(dst); err != nil {
		return nil, err
	}
	var err error
	if f.Row, err = EncodeSession(k, dst); err != nil {
		return nil, err
	}
	if f.DstEvents, err = EncodeEvents(k, dst.ID, dst.Events); err != nil {
		return nil, err
	}
	if f.SrcEvents, err = EncodeEvents(k, spec.Src, []sessions.Event{spec.SrcEvent}); err != nil {
		return nil, err
	}
	if !spec.SrcTime.IsZero() {
		t, err := EncodeTime(spec.SrcTime)
		if err != nil {
			return nil, sessions.IDError(spec.Src, fmt.Errorf("updated_at: %w", err))
		}
		f.SrcTime = &t
	}
	return f, nil
}

// View returns the fork's view of the source's first KeepFirst messages,
// the source's state being src, and whether src's view must be frozen
// first (the view's Base is then the frozen view's id; see ForkView).
// A KeepFirst out of range is an error.
func (f *Fork) View(src *State) (View, bool, error) {
	keep := int64(f.Spec.KeepFirst)
	if keep < 0 || keep > src.Length {
		return View{}, false, fmt.Errorf("fork of %q: keep_first %d out of range (it has %d messages)", f.Spec.Src, keep, src.Length)
	}
	v, freeze := ForkView(src.View, keep)
	return v, freeze, nil
}

// CheckNoChildren refuses a new session that lists children: the
// children of a session are the stored sessions whose parent it is, and
// Fork records them.
func CheckNoChildren(rec *sessions.Record) error {
	if len(rec.ChildIDs) > 0 {
		return sessions.IDError(rec.ID, errors.New("a new session cannot list children (forks record them)"))
	}
	return nil
}

// ForkTx is what Fork.Apply needs of a backend's write transaction.
type ForkTx interface {
	// LockedState reads (and locks, where the database locks rows) the
	// write state of session id (sessions.ErrNotFound).
	LockedState(id string) (*State, error)
	// Exists reports whether session id is stored.
	Exists(id string) (bool, error)
	// Freeze stores v, the current view of session row sid, as a frozen
	// view and returns its id.
	Freeze(sid int64, v View) (int64, error)
	// InsertSession stores rec with row's fields and view v of n messages
	// and returns its row id (sessions.ErrExists).
	InsertSession(rec *sessions.Record, row *SessionRow, v View, n int64) (int64, error)
	// InsertEvents appends events to session row sid's log.
	InsertEvents(sid int64, events []EventRow) error
	// Bump moves session row sid from version to version+1 and sets its
	// updated_at to t unless t is nil; it fails unless one row changed.
	Bump(sid, version int64, t *int64) error
}

// Apply writes the fork in tx: it checks the source's version, that the
// new id is free and the kept count in range, freezes the source's view
// when the fork needs it, stores the new session and the two events, and
// bumps the source's version: O(1) rows whatever the length.
func (f *Fork) Apply(tx ForkTx) error {
	spec := f.Spec
	src, err := tx.LockedState(spec.Src)
	if err != nil {
		return err
	}
	if src.Version != spec.SrcVersion {
		return sessions.IDError(spec.Src, sessions.ErrConflict)
	}
	if ok, err := tx.Exists(f.Dst.ID); err != nil || ok {
		if err == nil {
			err = sessions.ErrExists
		}
		return sessions.IDError(f.Dst.ID, err)
	}
	v, frozen, err := f.View(src)
	if err != nil {
		return err
	}
	if frozen {
		if v.Base, err = tx.Freeze(src.Row, src.View); err != nil {
			return fmt.Errorf("fork of %q: %w", spec.Src, err)
		}
	}
	sid, err := tx.InsertSession(&f.Dst, f.Row, v, v.BaseLen())
	if err != nil {
		return err
	}
	if err := tx.InsertEvents(sid, f.DstEvents); err != nil {
		return sessions.IDError(f.Dst.ID, err)
	}
	if err := tx.InsertEvents(src.Row, f.SrcEvents); err != nil {
		return sessions.IDError(spec.Src, err)
	}
	if err := tx.Bump(src.Row, src.Version, f.SrcTime); err != nil {
		return sessions.IDError(spec.Src, err)
	}
	return nil
}

// Create is a new session (sessions.Backend.Create, and CreateWithHistory
// of a sessions.HistoryBackend) in its stored form.
type Create struct {
	Row    *SessionRow
	Rows   []MessageRow // the history's rows, then the current messages'
	Events []EventRow
	// State is the new session's write state but its row id.
	State State
}

// EncodeCreate checks rec (it may list no children: Fork records them)
// and returns its stored form: appended, the messages some of its
// "message" events appended by seq, become rows before the current
// messages (EncodeHistory).
func EncodeCreate(k *storekey.Key, rec *sessions.Record, appended map[int64]message.Message) (*Create, error) {
	if err := CheckNoChildren(rec); err != nil {
		return nil, err
	}
	c := &Create{}
	var err error
	if c.Row, err = EncodeSession(k, rec); err != nil {
		return nil, err
	}
	bodies, err := EncodeMessages(k, rec.ID, "message", rec.Messages)
	if err != nil {
		return nil, err
	}
	if c.Events, err = EncodeEvents(k, rec.ID, rec.Events); err != nil {
		return nil, err
	}
	history, err := EncodeHistory(k, rec.ID, c.Events, appended)
	if err != nil {
		return nil, err
	}
	h := int64(len(history))
	c.Rows = AppendRows(AppendRows(nil, 0, history), h, bodies)
	c.State = State{Version: rec.Version, Length: int64(len(bodies)), View: View{OwnFrom: h}}
	return c, nil
}
