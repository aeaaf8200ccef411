package serve

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// A session reads "running": false only with every turn that had ended by
// then in what the response shows: a client polls GET until the session
// is idle and takes what it read as the outcome of its prompts. The tests
// below end a turn inside the read, between the two things a response
// reads (the session, whether a turn runs): before the fix the session was
// read first, and such a turn was neither shown nor reported running
// (TestQueuedPromptsRunInOrder failed once so: "active, 2 turns", its third
// prompt's turn had run between the two reads).

// readGate is a memory backend whose reads can run a test's function: once
// its listing has read the sessions, or once a read of the turn locks has
// been asked for, before it reads them.
type readGate struct {
	*sessions.MemoryBackend
	mu        sync.Mutex
	afterList func()
	onHeld    func()
}

// take returns *f and clears it (the function runs once).
func (g *readGate) take(f *func()) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn := *f
	*f = nil
	return fn
}

func (g *readGate) set(f *func(), fn func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	*f = fn
}

func (g *readGate) List(ctx context.Context, f sessions.ListFilter) ([]sessions.Summary, int, error) {
	rows, n, err := g.MemoryBackend.List(ctx, f)
	if fn := g.take(&g.afterList); fn != nil {
		fn()
	}
	return rows, n, err
}

func (g *readGate) NewLocker(time.Duration) (sessions.Locker, error) {
	return &gatedLocker{Locker: sessions.NewLocalLocker(), g: g}, nil
}

type gatedLocker struct {
	sessions.Locker
	g *readGate
}

func (l *gatedLocker) Held(ctx context.Context, names []string) (map[string]bool, error) {
	if fn := l.g.take(&l.g.onHeld); fn != nil {
		fn()
	}
	return l.Locker.Held(ctx, names)
}

func newGatedServer(t *testing.T, ag *fakeAgent) (*testServer, *readGate) {
	t.Helper()
	g := &readGate{MemoryBackend: sessions.NewMemoryBackend()}
	store, err := sessions.NewStore(g)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Store: store}
	if ag != nil {
		ag.store = store
		cfg.Agents = map[string]Agent{"echo": ag}
	}
	return newTestServer(t, cfg), g
}

// TestIdleReadShowsTheEndedTurn: a turn of another process (its turn
// lock held, its prompt stored) ends while GET /api/sessions/{id} reads:
// the session reads running, or idle with the turn's reply.
func TestIdleReadShowsTheEndedTurn(t *testing.T) {
	ts, g := newGatedServer(t, nil)
	id := ts.create(nil)
	ctx := context.Background()
	lk, err := ts.srv.locks.TryLock(ctx, turnLock(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.store.Apply(ctx, id, &sessions.Change{AddTurns: 1, Append: []message.Message{{Role: message.RoleUser, Text: "question"}}}); err != nil {
		t.Fatal(err)
	}
	g.set(&g.onHeld, func() {
		if _, err := ts.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "answer"}}}); err != nil {
			t.Error(err)
		}
		lk.Unlock(ctx)
	})
	r := ts.do("GET", "/api/sessions/"+id, nil)
	ts.expect(r, http.StatusOK, "")
	s := r.json()
	if g.take(&g.onHeld) != nil {
		t.Fatal("the read did not ask for the turn lock")
	}
	if n := len(s["messages"].([]any)); s["running"] == false && n != 2 {
		t.Fatalf("the session reads idle with %d messages, without the reply of the turn that ended: %s", n, r.body)
	}
}

// TestIdleListingShowsTheEndedTurns: a turn and a prompt queued behind it
// (this process's) both end while GET /api/sessions reads: the session's
// row reads running, or idle with both turns.
func TestIdleListingShowsTheEndedTurns(t *testing.T) {
	ag := &fakeAgent{block: make(chan struct{})}
	ts, g := newGatedServer(t, ag)
	id := ts.create(nil)
	ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "one"}), http.StatusAccepted, "")
	r := ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "two"})
	ts.expect(r, http.StatusAccepted, "")
	if r.json()["queued"] != true {
		t.Fatalf("second prompt not queued: %s", r.body)
	}
	g.set(&g.afterList, func() {
		close(ag.block)
		deadline := time.Now().Add(10 * time.Second)
		for ts.srv.runningHere(id) {
			if time.Now().After(deadline) {
				t.Error("the turns did not end")
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	r = ts.do("GET", "/api/sessions", nil)
	ts.expect(r, http.StatusOK, "")
	if g.take(&g.afterList) != nil {
		t.Fatal("the listing did not read the sessions")
	}
	rows := r.json()["sessions"].([]any)
	if len(rows) != 1 {
		t.Fatalf("listing: %s", r.body)
	}
	row := rows[0].(map[string]any)
	if row["running"] == false && (row["turns"] != float64(2) || row["messageCount"] != float64(4)) {
		t.Fatalf("the session reads idle without the turns that ended: %v", row)
	}
}
