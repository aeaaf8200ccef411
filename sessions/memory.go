package sessions

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions/message"
)

// MemoryBackend is a Backend that keeps sessions in process memory. It is
// not durable: the store deletes a session from it when the session leaves
// the LRU, and nothing survives the process. Forks share their parent's
// messages through Transcript.
type MemoryBackend struct {
	mu       sync.Mutex
	sessions map[string]*memRecord
	runs     map[string]*memRun // run records (memory_runs.go)
	repos    map[string]Repo    // repository records (memory_repos.go)
}

type memRecord struct {
	rec        Record // Messages unused; see transcript
	transcript message.Transcript
}

var (
	_ Backend       = (*MemoryBackend)(nil)
	_ PartialLoader = (*MemoryBackend)(nil)
)

// NewMemoryBackend returns an empty in-memory backend.
func NewMemoryBackend() *MemoryBackend {
	return &MemoryBackend{sessions: map[string]*memRecord{}}
}

// Durable reports false: memory sessions end with their eviction.
func (b *MemoryBackend) Durable() bool { return false }

// Create stores a new session.
func (b *MemoryBackend) Create(_ context.Context, rec *Record) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.sessions[rec.ID]; ok {
		return IDError(rec.ID, ErrExists)
	}
	if err := CheckParentChain(rec.ID, rec.ParentID, func(id string) (string, bool, error) {
		r, ok := b.sessions[id]
		if !ok {
			return "", false, nil
		}
		return r.rec.ParentID, true, nil
	}); err != nil {
		return err
	}
	r := &memRecord{rec: cloneRecordFields(rec), transcript: message.NewTranscript(slices.Clone(rec.Messages))}
	b.sessions[rec.ID] = r
	return nil
}

// Load returns a copy of the stored session.
func (b *MemoryBackend) Load(_ context.Context, id string) (*Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.sessions[id]
	if !ok {
		return nil, IDError(id, ErrNotFound)
	}
	out := cloneRecordFields(&r.rec)
	out.Messages = slices.Clone(r.transcript.Slice())
	return &out, nil
}

// LoadTranscript returns a copy of the stored session without its event
// log, and the seq of the log's newest event (PartialLoader): the store
// keeps a live session's log here only, not twice.
func (b *MemoryBackend) LoadTranscript(_ context.Context, id string) (*Record, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.sessions[id]
	if !ok {
		return nil, 0, IDError(id, ErrNotFound)
	}
	out := cloneRecordMeta(&r.rec)
	out.Messages = slices.Clone(r.transcript.Slice())
	var last int64
	if n := len(r.rec.Events); n > 0 {
		last = r.rec.Events[n-1].Seq
	}
	return &out, last, nil
}

// LoadEvents returns a copy of the session's event log (PartialLoader).
func (b *MemoryBackend) LoadEvents(_ context.Context, id string) ([]Event, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.sessions[id]
	if !ok {
		return nil, IDError(id, ErrNotFound)
	}
	return slices.Clone(r.rec.Events), nil
}

// LoadMeta returns a copy of the stored session without messages and events.
func (b *MemoryBackend) LoadMeta(_ context.Context, id string) (*Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.sessions[id]
	if !ok {
		return nil, IDError(id, ErrNotFound)
	}
	out := cloneRecordMeta(&r.rec)
	return &out, nil
}

// Exists reports whether id is stored.
func (b *MemoryBackend) Exists(_ context.Context, id string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.sessions[id]
	return ok, nil
}

// Write applies changes, in order, if the stored version is base: all of
// them or, after an error, none.
func (b *MemoryBackend) Write(_ context.Context, id string, base int64, changes ...*Change) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.sessions[id]
	if !ok {
		return IDError(id, ErrNotFound)
	}
	if r.rec.Version != base {
		return IDError(id, ErrConflict)
	}
	n := r.transcript.Len()
	for _, ch := range changes {
		if err := checkDropFirst(ch, n); err != nil {
			return IDError(id, err)
		}
		n = changedLen(n, ch)
	}
	for _, ch := range changes {
		r.transcript = ApplyToTranscript(r.transcript, ch)
		ApplyToRecord(&r.rec, ch)
	}
	return nil
}

// changedLen returns the length of a list of n messages after ch.
func changedLen(n int, ch *Change) int {
	switch {
	case ch.Replace:
		n = len(ch.ReplaceWith)
	case ch.DropFirst > 0:
		n -= ch.DropFirst
	case ch.DropLast > 0:
		n -= ch.DropLast
	}
	return n + len(ch.Append)
}

// checkDropFirst reports an error when ch drops messages a list of n
// messages does not have (DropFirst and DropLast are ignored when Replace
// is set), or drops from both ends.
func checkDropFirst(ch *Change, n int) error {
	switch {
	case ch.DropFirst < 0 || (!ch.Replace && ch.DropFirst > n):
		return fmt.Errorf("cannot drop %d of %d messages", ch.DropFirst, n)
	case ch.DropLast < 0 || (!ch.Replace && ch.DropLast > n):
		return fmt.Errorf("cannot drop the last %d of %d messages", ch.DropLast, n)
	case !ch.Replace && ch.DropFirst > 0 && ch.DropLast > 0:
		return fmt.Errorf("cannot drop messages from both ends in one write")
	}
	return nil
}

// ApplyToTranscript returns t after the message edits of ch (Replace or
// DropFirst or DropLast, then Append). It is shared by the store and the in-memory
// backend so both apply a Change the same way.
func ApplyToTranscript(t message.Transcript, ch *Change) message.Transcript {
	switch {
	case ch.Replace:
		t = message.NewTranscript(slices.Clone(ch.ReplaceWith))
	case ch.DropFirst > 0:
		t = t.Tail(t.Len() - ch.DropFirst)
	case ch.DropLast > 0:
		t = t.Head(t.Len() - ch.DropLast)
	}
	if len(ch.Append) > 0 {
		t = t.Append(ch.Append...)
	}
	return t
}

// ApplyToRecord applies the non-message parts of ch to rec and bumps its
// version.
func ApplyToRecord(rec *Record, ch *Change) {
	rec.Events = appendDoubling(rec.Events, ch.Events...)
	applyFields(rec, ch)
}

// applyFields is ApplyToRecord but for the events.
func applyFields(rec *Record, ch *Change) {
	if ch.SetSummary {
		rec.Summary = cloneString(ch.Summary)
	}
	if ch.Status != "" {
		rec.Status = ch.Status
	}
	rec.Turns += ch.AddTurns
	if ch.MaxTurns > 0 {
		rec.MaxTurns = ch.MaxTurns
	}
	if ch.SetTitle {
		rec.Title = ch.Title
	}
	if ch.SetMetadata {
		rec.Metadata = jsonvalue.CloneObject(ch.Metadata)
	}
	if ch.SetFirstPrompt {
		rec.FirstPrompt = ch.FirstPrompt
	}
	if !ch.UpdatedAt.IsZero() {
		rec.UpdatedAt = ch.UpdatedAt
	}
	rec.Version++
}

// Fork creates spec.Dst sharing the source's first KeepFirst messages.
func (b *MemoryBackend) Fork(_ context.Context, spec *ForkSpec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	src, ok := b.sessions[spec.Src]
	if !ok {
		return IDError(spec.Src, ErrNotFound)
	}
	if src.rec.Version != spec.SrcVersion {
		return IDError(spec.Src, ErrConflict)
	}
	if _, ok := b.sessions[spec.Dst.ID]; ok {
		return IDError(spec.Dst.ID, ErrExists)
	}
	if spec.KeepFirst < 0 || spec.KeepFirst > src.transcript.Len() {
		return fmt.Errorf("fork of %q: keep_first %d out of range", spec.Src, spec.KeepFirst)
	}
	dst := &memRecord{rec: cloneRecordFields(&spec.Dst), transcript: src.transcript.Head(spec.KeepFirst)}
	b.sessions[spec.Dst.ID] = dst
	src.rec.ChildIDs = append(src.rec.ChildIDs, spec.Dst.ID)
	ApplyToRecord(&src.rec, &Change{Events: []Event{spec.SrcEvent}, UpdatedAt: spec.SrcTime})
	return nil
}

// List returns matching sessions, newest first.
func (b *MemoryBackend) List(_ context.Context, f ListFilter) ([]Summary, int, error) {
	if err := f.Check(); err != nil {
		return nil, 0, err
	}
	b.mu.Lock()
	var all []Summary
	for _, r := range b.sessions {
		if !f.matches(&r.rec) {
			continue
		}
		sum := Summary{ID: r.rec.ID, Status: r.rec.Status, CreatedAt: r.rec.CreatedAt,
			UpdatedAt: r.rec.UpdatedAt, ParentID: r.rec.ParentID, Length: r.transcript.Len(),
			Turns: r.rec.Turns, Children: len(r.rec.ChildIDs), Title: r.rec.Title,
			FirstPrompt: r.rec.FirstPrompt, Metadata: jsonvalue.CloneObject(r.rec.Metadata)}
		if MatchConds(f.Conds, &sum) {
			all = append(all, sum)
		}
	}
	b.mu.Unlock()
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID > all[j].ID
	})
	return f.Page(all), f.Counted(len(all)), nil
}

// Check reports an error for a negative Limit, Offset or CountLimit.
func (f *ListFilter) Check() error {
	if f.Limit < 0 {
		return fmt.Errorf("list: limit must be >= 0, got %d", f.Limit)
	}
	if f.Offset < 0 {
		return fmt.Errorf("list: offset must be >= 0, got %d", f.Offset)
	}
	if f.CountLimit < 0 {
		return fmt.Errorf("list: count limit must be >= 0, got %d", f.CountLimit)
	}
	return nil
}

// Counted returns the total List reports for n matches: n, or
// CountLimit when that is set and smaller.
func (f *ListFilter) Counted(n int) int {
	if f.CountLimit > 0 {
		return min(n, f.CountLimit)
	}
	return n
}

// MatchesText reports whether a session with that id, title and first
// prompt matches Text (see ListFilter.Text).
func (f *ListFilter) MatchesText(id, title, firstPrompt string) bool {
	if f.Text == "" {
		return true
	}
	text := strings.ToLower(f.Text)
	if title == "" {
		title = firstPrompt
	}
	return strings.Contains(strings.ToLower(id), text) || strings.Contains(strings.ToLower(title), text)
}

func (f *ListFilter) matches(r *Record) bool {
	if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status) {
		return false
	}
	if f.ParentID != "" && r.ParentID != f.ParentID {
		return false
	}
	if s, _ := r.Metadata["repoId"].(string); f.RepoID != "" && s != f.RepoID {
		return false
	}
	if s, _ := r.Metadata["agent"].(string); f.Agent != "" && s != f.Agent || f.HasAgent && s == "" {
		return false
	}
	if !f.UpdatedBefore.IsZero() && !r.UpdatedAt.Before(f.UpdatedBefore) ||
		!f.UpdatedAfter.IsZero() && r.UpdatedAt.Before(f.UpdatedAfter) ||
		!f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore) ||
		!f.CreatedAfter.IsZero() && r.CreatedAt.Before(f.CreatedAfter) {
		return false
	}
	if f.After != nil && !f.After.Before(r.CreatedAt, r.ID) {
		return false
	}
	return f.MatchesText(r.ID, r.Title, r.FirstPrompt)
}

// Page returns the page of all (a whole listing, in order) that f's
// Offset and Limit select.
func (f *ListFilter) Page(all []Summary) []Summary {
	if f.Offset >= len(all) {
		return nil
	}
	all = all[f.Offset:]
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
	}
	return all
}

// Delete removes a session (and, if recursive, its forks).
func (b *MemoryBackend) Delete(_ context.Context, id string, recursive bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.sessions[id]
	if !ok {
		return IDError(id, ErrNotFound)
	}
	if len(r.rec.ChildIDs) > 0 && !recursive {
		if b.anyChildStored(r) {
			return IDError(id, ErrHasChildren)
		}
	}
	b.deleteLocked(id)
	return nil
}

func (b *MemoryBackend) anyChildStored(r *memRecord) bool {
	for _, c := range r.rec.ChildIDs {
		if _, ok := b.sessions[c]; ok {
			return true
		}
	}
	return false
}

func (b *MemoryBackend) deleteLocked(id string) {
	r, ok := b.sessions[id]
	if !ok {
		return
	}
	delete(b.sessions, id)
	for _, c := range r.rec.ChildIDs {
		b.deleteLocked(c)
	}
	if p, ok := b.sessions[r.rec.ParentID]; ok {
		p.rec.ChildIDs = slices.DeleteFunc(p.rec.ChildIDs, func(c string) bool { return c == id })
	}
}

// Forget removes a session without the child check and without touching
// its children: the store calls it when a session leaves the LRU.
func (b *MemoryBackend) Forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.sessions, id)
}

// Close does nothing.
func (b *MemoryBackend) Close() error { return nil }

// cloneRecordFields copies rec's own slices and maps (not Messages) so the
// copy can be changed without touching rec.
func cloneRecordFields(rec *Record) Record {
	out := cloneRecordMeta(rec)
	out.Events = slices.Clone(rec.Events)
	return out
}

// cloneRecordMeta is cloneRecordFields without Events (nil in the copy).
func cloneRecordMeta(rec *Record) Record {
	out := *rec
	out.Messages, out.Events = nil, nil
	out.ChildIDs = slices.Clone(rec.ChildIDs)
	out.Summary = cloneString(rec.Summary)
	out.Metadata = jsonvalue.CloneObject(rec.Metadata)
	if rec.BranchedAt != nil {
		n := *rec.BranchedAt
		out.BranchedAt = &n
	}
	return out
}

func cloneString(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// appendDoubling is append that doubles the storage when it grows, as a
// message.Transcript grows: Go's append grows large slices by only a
// quarter, which copies a long event log about five times over.
func appendDoubling[T any](s []T, more ...T) []T {
	if need := len(s) + len(more); need > cap(s) {
		grown := make([]T, len(s), max(2*cap(s), need, 16))
		copy(grown, s)
		s = grown
	}
	return append(s, more...)
}
