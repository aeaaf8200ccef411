package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// TestStoredCycleTerminates: a parent cycle written by an older version
// (A's parent B, B's parent A) makes every lineage walk stop with
// sessions.ErrCycle rather than overflow the stack or loop: gc,
// Descendants (rm), the store's Ancestry. A recursive delete removes the
// whole cycle.
func TestStoredCycleTerminates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sessions.db")
	b := openClosed(t, path)
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"A", "B", "C"} {
		rec := &sessions.Record{ID: id, Status: sessions.StatusCompleted, CreatedAt: old, UpdatedAt: old}
		if err := b.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	db := rawDB(t, path)
	for _, q := range []string{`UPDATE sessions SET parent_id = 'B' WHERE id = 'A'`, `UPDATE sessions SET parent_id = 'A' WHERE id IN ('B', 'C')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}

	timer := time.AfterFunc(time.Minute, func() { panic("a lineage walk did not terminate on a stored cycle") })
	defer timer.Stop()

	if _, err := sessions.Collect(ctx, b, sessions.ListFilter{UpdatedBefore: time.Now()}, true); !errors.Is(err, sessions.ErrCycle) {
		t.Errorf("Collect = %v, want ErrCycle", err)
	}
	forks, err := sessions.Descendants(ctx, b, "A")
	if !errors.Is(err, sessions.ErrCycle) || err.Error() != "session 'A': fork cycle: A -> B -> A" {
		t.Errorf("Descendants = %v, %v; want the cycle A -> B -> A", forks, err)
	}
	st, err := sessions.NewStore(b)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := st.Ancestry(ctx, "C"); !errors.Is(err, sessions.ErrCycle) {
		t.Errorf("Ancestry(C) = %+v, %v; want ErrCycle", l, err)
	}
	if err := b.Delete(ctx, "A", true); err != nil {
		t.Fatalf("recursive Delete of a cycle: %v", err)
	}
	for _, id := range []string{"A", "B", "C"} {
		if ok, err := b.Exists(ctx, id); err != nil || ok {
			t.Errorf("Exists(%s) after the recursive delete = %v, %v", id, ok, err)
		}
	}
}

// TestDeepMessageNamesItsIndex: a message nested past jsonvalue.MaxDepth is
// refused before it reaches the database, with the error naming its index
// in the session (not its index in the write) and the path to the value.
func TestDeepMessageNamesItsIndex(t *testing.T) {
	ctx := t.Context()
	st, err := sessions.NewStore(openClosed(t, filepath.Join(t.TempDir(), "sessions.db")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(ctx, "d", 0); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"a", "b"} {
		if _, err := st.Apply(ctx, "d", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	var deep any = []any{}
	for range 12000 {
		deep = []any{deep}
	}
	_, err = st.Apply(ctx, "d", &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: "c", Metadata: map[string]any{"x": deep}}}})
	var de *jsonvalue.DepthError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "message 2: metadata: at .x[0][0]") {
		t.Fatalf("Apply of a deep message = %v", err)
	}
	if n, err := st.Length(ctx, "d"); err != nil || n != 2 {
		t.Errorf("Length after the refusal = %d, %v", n, err)
	}
}
