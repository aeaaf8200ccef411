package sqlite

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// TestApplyRun: Store.ApplyRun writes a session's change and a run
// record's update in one transaction (WriteRun): both, on the write
// connection after the backend's own write of the session and in a
// transaction that reads its state first, or neither when the run is
// missing.
func TestApplyRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	ctx := t.Context()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := sessions.NewStore(openTest(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	if _, err := s.Open(ctx, "st", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRun(ctx, &sessions.RunRecord{ID: "r", Workflow: "w", Fingerprint: "f", Status: "running",
		CreatedAt: at, UpdatedAt: at, Head: []byte(`{"task":"t"}`)}); err != nil {
		t.Fatal(err)
	}
	end := func() *sessions.Change {
		return &sessions.Change{Events: []sessions.Event{sessions.NewEvent("stage_end", map[string]any{"node": "a"})}}
	}
	// the first write of "st" after its creation reads its state; the
	// second follows the backend's own write (writeKnown)
	for i, step := range []string{`{"node":"a"}`, `{"node":"b"}`} {
		u := &sessions.RunUpdate{Status: "running", UpdatedAt: at, Head: []byte(`{"task":"t","n":1}`), Steps: [][]byte{[]byte(step)}}
		if _, err := s.ApplyRun(ctx, "st", end(), "r", u); err != nil {
			t.Fatal(err)
		}
		rec, err := s.LoadRun(ctx, "r")
		if err != nil || len(rec.Steps) != i+1 || string(rec.Steps[i]) != step {
			t.Fatalf("write %d: run %+v, %v", i, rec, err)
		}
	}
	u := &sessions.RunUpdate{Status: "running", UpdatedAt: at, Head: []byte(`{}`), Steps: [][]byte{[]byte(`{}`)}}
	if _, err := s.ApplyRun(ctx, "st", end(), "nope", u); !errors.Is(err, sessions.ErrRunNotFound) || err.Error() != "run 'nope': unknown run id" {
		t.Fatalf("a missing run: %v", err)
	}
	// neither half was written: a store on the reopened file (after
	// s's shutdown, which writes whatever s holds) has two stage_end
	s.Shutdown()
	again, err := sessions.NewStore(openTest(t, path))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Shutdown()
	rec, err := again.Snapshot(ctx, "st")
	if err != nil {
		t.Fatal(err)
	}
	ends := 0
	for _, e := range rec.Events {
		if e.Type == "stage_end" {
			ends++
		}
	}
	if ends != 2 {
		t.Fatalf("%d stage_end events stored, want 2 (the failed write's not among them)", ends)
	}
}
