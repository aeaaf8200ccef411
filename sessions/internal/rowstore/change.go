package rowstore

import (
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/storekey"
)

// State is what a write needs of a stored session: its row's id, version,
// message count and current view.
type State struct {
	Row, Version, Length int64
	View                 View
}

// Change is a sessions.Change in its stored form.
type Change struct {
	Change                                *sessions.Change
	Replace, Appended                     []Body
	Events                                []EventRow
	Status                                *string
	Summary, Title, Metadata, FirstPrompt Stored
	Updated                               *int64
	// Labels are the metadata's labels (when the change sets it).
	Labels Labels
}

// EncodeChange returns the stored form of ch, a change to session id, its
// payloads sealed with k unless k is nil, or an error for a change no
// backend can apply.
func EncodeChange(k *storekey.Key, id string, ch *sessions.Change) (*Change, error) {
	if ch.DropFirst < 0 {
		return nil, sessions.IDError(id, fmt.Errorf("cannot drop %d messages", ch.DropFirst))
	}
	if ch.DropLast < 0 || (ch.DropLast > 0 && ch.DropFirst > 0 && !ch.Replace) {
		return nil, sessions.IDError(id, fmt.Errorf("cannot drop the last %d messages (with %d first)", ch.DropLast, ch.DropFirst))
	}
	e := &Change{Change: ch}
	if ch.SetSummary {
		e.Summary = EncodeText(k, FieldSummary, ch.Summary)
	}
	if ch.SetTitle {
		e.Title = EncodeText(k, FieldTitle, NullString(ch.Title))
	}
	if ch.SetFirstPrompt {
		e.FirstPrompt = EncodeText(k, FieldFirstPrompt, NullString(ch.FirstPrompt))
	}
	var err error
	if ch.Replace {
		if e.Replace, err = EncodeMessages(k, id, "replacement message", ch.ReplaceWith); err != nil {
			return nil, err
		}
	}
	if e.Appended, err = EncodeMessages(k, id, "appended message", ch.Append); err != nil {
		return nil, err
	}
	if e.Events, err = EncodeEvents(k, id, ch.Events); err != nil {
		return nil, err
	}
	e.Status = NullString(string(ch.Status))
	if !ch.UpdatedAt.IsZero() {
		t, err := EncodeTime(ch.UpdatedAt)
		if err != nil {
			return nil, sessions.IDError(id, fmt.Errorf("updated_at: %w", err))
		}
		e.Updated = &t
	}
	if e.Metadata, err = encodeObject(k, FieldMetadata, ch.Metadata); err != nil {
		return nil, sessions.IDError(id, fmt.Errorf("metadata: %w", err))
	}
	e.Labels = LabelsOf(ch.Metadata)
	return e, nil
}

// EncodeChanges is EncodeChange of each change.
func EncodeChanges(k *storekey.Key, id string, changes []*sessions.Change) ([]*Change, error) {
	out := make([]*Change, len(changes))
	for i, ch := range changes {
		var err error
		if out[i], err = EncodeChange(k, id, ch); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RowUpdate is what the changes of one Write do to the session's row
// besides its view: each field as the last change that sets it left it.
// A nil Status or Updated leaves the column as it is.
type RowUpdate struct {
	SetSummary, SetTitle, SetMetadata, SetFirstPrompt bool
	Summary, Title, Metadata, FirstPrompt             Stored
	Labels                                            Labels // with SetMetadata
	Status                                            *string
	Updated                                           *int64
	Turns, MaxTurns                                   int
}

// add folds e into u.
func (u *RowUpdate) add(e *Change) {
	ch := e.Change
	if ch.SetSummary {
		u.SetSummary, u.Summary = true, e.Summary
	}
	if e.Status != nil {
		u.Status = e.Status
	}
	u.Turns += ch.AddTurns
	if ch.MaxTurns > 0 {
		u.MaxTurns = ch.MaxTurns
	}
	if ch.SetTitle {
		u.SetTitle, u.Title = true, e.Title
	}
	if ch.SetMetadata {
		u.SetMetadata, u.Metadata, u.Labels = true, e.Metadata, e.Labels
	}
	if ch.SetFirstPrompt {
		u.SetFirstPrompt, u.FirstPrompt = true, e.FirstPrompt
	}
	if e.Updated != nil {
		u.Updated = e.Updated
	}
}

// MessageRow is a message row to insert: its position and stored body.
type MessageRow struct {
	Pos  int64
	Body Body
}

// AppendRows appends bodies to rows at positions pos, pos+1, ...
func AppendRows(rows []MessageRow, pos int64, bodies []Body) []MessageRow {
	for i, body := range bodies {
		rows = append(rows, MessageRow{pos + int64(i), body})
	}
	return rows
}

// Plan is what one Write does to a session: the message and event rows to
// insert, the session row's new view, length and other fields, and the
// frozen views the view no longer rests on, to release after the update.
type Plan struct {
	Rows    []MessageRow
	Events  []EventRow
	Update  RowUpdate
	View    View
	Length  int64
	Changes int // how many changes: the version moves by that much
	// Release lists the bases the view left, newest first: a base frozen
	// by the write's DropLast holds the one before it.
	Release []int64
}

// ErrFreeze is what a freeze function passed to PlanWrite returns to say
// it cannot freeze a view here (a backend planning a write outside a
// transaction): PlanWrite then fails with it.
var ErrFreeze = errors.New("the write freezes a view")

// PlanWrite plans the changes of one Write to session id, whose stored
// state is st. freeze stores a frozen view (for a DropLast that keeps
// messages of the session's own rows) and returns its id. A DropFirst or
// DropLast beyond the message count fails, as does a freeze.
func PlanWrite(id string, st *State, changes []*Change, freeze func(View) (int64, error)) (*Plan, error) {
	p := &Plan{View: st.View, Length: st.Length, Changes: len(changes)}
	v, n := st.View, st.Length
	bases := []int64{st.View.Base} // every base the view had, oldest first
	for _, e := range changes {
		ch := e.Change
		switch {
		case ch.Replace:
			v = View{OwnFrom: v.Next(n)}
			p.Rows = AppendRows(p.Rows, v.OwnFrom, e.Replace)
			n = int64(len(e.Replace))
		case ch.DropFirst > 0:
			if int64(ch.DropFirst) > n {
				return nil, sessions.IDError(id, fmt.Errorf("cannot drop %d of %d messages", ch.DropFirst, n))
			}
			v, n = v.Drop(int64(ch.DropFirst)), n-int64(ch.DropFirst)
		case ch.DropLast > 0:
			if int64(ch.DropLast) > n {
				return nil, sessions.IDError(id, fmt.Errorf("cannot drop the last %d of %d messages", ch.DropLast, n))
			}
			var err error
			if v, err = DropLast(v, n, int64(ch.DropLast), freeze); err != nil {
				return nil, sessions.IDError(id, err)
			}
			n -= int64(ch.DropLast)
		}
		events := append([]EventRow(nil), e.Events...)
		PairAppended(events, v.Next(n), len(e.Appended))
		p.Rows = AppendRows(p.Rows, v.Next(n), e.Appended)
		n += int64(len(e.Appended))
		p.Events = append(p.Events, events...)
		p.Update.add(e)
		if v.Base != bases[len(bases)-1] {
			bases = append(bases, v.Base)
		}
	}
	p.View, p.Length = v, n
	for i := len(bases) - 1; i >= 0; i-- {
		if bases[i] != v.Base && bases[i] != 0 {
			p.Release = append(p.Release, bases[i])
		}
	}
	return p, nil
}

// After returns the session's write state once p is applied to a session
// whose state was st.
func (p *Plan) After(st *State) State {
	return State{Row: st.Row, Version: st.Version + int64(p.Changes), Length: p.Length, View: p.View}
}
