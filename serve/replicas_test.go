package serve

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// databases runs fn once per shared backend, as subtests: two SQLite
// Backends on one file; two PostgreSQL Backends on one schema (skipped
// without SKEIN_TEST_POSTGRES). open returns one more backend over the
// database.
func databases(t *testing.T, fn func(t *testing.T, open func() sessions.Backend)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "sessions.db")
		fn(t, func() sessions.Backend {
			be, err := sqlite.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			return be
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
			t.Fatal(err)
		}
		fn(t, func() sessions.Backend {
			be, err := postgres.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			return be
		})
	})
}

// replicas returns two servers, each with its own store and backend over
// one database, as two skein serve processes on one database are. Their
// agents block each turn until block is closed (nil: never block).
func replicas(t *testing.T, open func() sessions.Backend, cfg Config, block chan struct{}) (a, b *testServer) {
	t.Helper()
	newReplica := func() *testServer {
		store, err := sessions.NewStore(open())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Shutdown() })
		c := cfg
		c.Store = store
		c.Agents = map[string]Agent{"echo": &fakeAgent{store: store, block: block}}
		if c.PollInterval == 0 {
			c.PollInterval = 10 * time.Millisecond
		}
		return newTestServer(t, c)
	}
	return newReplica(), newReplica()
}

// TestReplicasEvents: an SSE stream on one replica sees the events of a
// turn that ran on the other, in order and without duplicates, and a
// stream resumed on the other replica with Last-Event-ID continues
// without gaps.
func TestReplicasEvents(t *testing.T) { databases(t, testReplicasEvents) }

func testReplicasEvents(t *testing.T, open func() sessions.Backend) {
	a, b := replicas(t, open, Config{}, nil)
	id := a.create(nil)
	s := a.events(id, "")
	s.waitComment(t, "ready")
	b.expect(b.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "from b"}), http.StatusAccepted, "")
	var seqs []int64
	for len(seqs) < 2 {
		f := s.next(t)
		if f.data["type"] == "text_delta" {
			t.Fatalf("a text_delta crossed replicas: %v", f.data)
		}
		n, _ := strconv.ParseInt(f.id, 10, 64)
		seqs = append(seqs, n)
		if f.data["type"] != "message" {
			t.Fatalf("event %v", f.data)
		}
	}
	if seqs[0] != 2 || seqs[1] != 3 { // 1, session:started, came before "ready"
		t.Fatalf("seqs %v, want 2 3", seqs)
	}
	b.waitIdle(id)
	s.close()

	// Resume on b from the last event a sent; a's second prompt follows.
	r := b.events(id, "3")
	r.waitComment(t, "ready")
	a.expect(a.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "from a"}), http.StatusAccepted, "")
	for want := int64(4); want <= 5; want++ {
		f := r.next(t)
		if f.id != strconv.FormatInt(want, 10) {
			t.Fatalf("resumed on b: event id %q, want %d (%v)", f.id, want, f.data)
		}
	}
	a.waitIdle(id)
	got := b.do("GET", "/api/sessions/"+id, nil)
	b.expect(got, http.StatusOK, "")
	if roles := messageRoles(got.json()); roles != "user assistant user assistant" {
		t.Fatalf("messages on b: %s", roles)
	}
}

// messageRoles lists the roles of a session object's messages.
func messageRoles(m map[string]any) string {
	out := ""
	for _, msg := range m["messages"].([]any) {
		if out != "" {
			out += " "
		}
		out += msg.(map[string]any)["role"].(string)
	}
	return out
}

// TestReplicasAlternatePrompts: prompts to one session alternate between
// replicas; each turn starts from what the other wrote (a replica's
// cached copy of the session is refreshed), so none conflicts.
func TestReplicasAlternatePrompts(t *testing.T) { databases(t, testReplicasAlternatePrompts) }

func testReplicasAlternatePrompts(t *testing.T, open func() sessions.Backend) {
	a, b := replicas(t, open, Config{}, nil)
	id := a.create(nil)
	for i := range 6 {
		ts := []*testServer{a, b}[i%2]
		ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "p" + strconv.Itoa(i)}), http.StatusAccepted, "")
		ts.waitIdle(id)
		got := ts.do("GET", "/api/sessions/"+id, nil).json()
		if got["status"] != "active" || got["messageCount"] != float64(2*(i+1)) {
			t.Fatalf("after prompt %d on replica %d: status %v, %v messages", i, i%2, got["status"], got["messageCount"])
		}
	}
}

// TestReplicasOneTurn: while a turn runs on one replica, the other
// refuses a second turn (409), shows the session running, and can
// cancel the turn (the session stays active) or delete the session (it
// waits for the turn to stop).
func TestReplicasOneTurn(t *testing.T) { databases(t, testReplicasOneTurn) }

func testReplicasOneTurn(t *testing.T, open func() sessions.Backend) {
	block := make(chan struct{})
	a, b := replicas(t, open, Config{}, block)
	id := a.create(nil)
	b.expect(b.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "slow"}), http.StatusAccepted, "")
	// A prompt to a while b's turn runs waits in a's queue.
	if r := a.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "second"}); r.status != http.StatusAccepted || r.json()["queued"] != true {
		t.Fatalf("prompt to a during b's turn: %d %s", r.status, r.body)
	}
	if got := a.do("GET", "/api/sessions/"+id, nil).json(); got["running"] != true {
		t.Fatalf("a does not show b's turn running: %v", got["running"])
	}
	list := a.do("GET", "/api/sessions", nil).json()["sessions"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["running"] != true {
		t.Fatalf("a's list does not show b's turn running: %v", list)
	}
	a.expect(a.do("POST", "/api/sessions/"+id+"/cancel", nil), http.StatusAccepted, "")
	// b's turn stops; a's queued prompt then runs on a, cancelled from b.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(contents(a.do("GET", "/api/sessions/"+id, nil).json()), "second") {
		if time.Now().After(deadline) {
			t.Fatal("a's queued prompt did not start after b's turn was cancelled")
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.expect(b.do("POST", "/api/sessions/"+id+"/cancel", nil), http.StatusAccepted, "")
	b.waitIdle(id)
	a.waitIdle(id)
	if got := a.do("GET", "/api/sessions/"+id, nil).json(); got["status"] != "active" || got["running"] != false {
		t.Fatalf("after a cancel from a: %v running %v", got["status"], got["running"])
	}
	a.expect(a.do("POST", "/api/sessions/"+id+"/cancel", nil), http.StatusConflict, "no_turn")

	// A turn on a, deleted from b.
	a.expect(a.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "slow again"}), http.StatusAccepted, "")
	del := b.do("DELETE", "/api/sessions/"+id, nil)
	b.expect(del, http.StatusOK, "")
	if got := del.json(); got["status"] != "cancelled" || got["running"] != false {
		t.Fatalf("delete from b: %s", del.body)
	}
	a.waitIdle(id)
	got := a.do("GET", "/api/sessions/"+id, nil).json()
	if got["status"] != "cancelled" {
		t.Fatalf("a after b's delete: %v", got["status"])
	}
}

// TestReplicasMaxSessions: the active-session limit counts the sessions
// of every replica.
func TestReplicasMaxSessions(t *testing.T) { databases(t, testReplicasMaxSessions) }

func testReplicasMaxSessions(t *testing.T, open func() sessions.Backend) {
	a, b := replicas(t, open, Config{MaxSessions: 3}, nil)
	ids := []string{a.create(nil), b.create(nil), a.create(nil)}
	for _, ts := range []*testServer{a, b} {
		r := ts.do("POST", "/api/sessions", map[string]any{})
		ts.expect(r, http.StatusTooManyRequests, "too_many_sessions")
	}
	b.expect(b.do("DELETE", "/api/sessions/"+ids[0], nil), http.StatusOK, "")
	a.create(nil)
	b.expect(b.do("POST", "/api/sessions", map[string]any{}), http.StatusTooManyRequests, "too_many_sessions")
	if h := a.doAuth("GET", "/healthz", nil, "").json(); h["activeSessions"] != float64(3) {
		t.Fatalf("healthz on a: %v", h)
	}
}

// TestReplicasCreateRace: replicas creating sessions at once never
// exceed the limit together.
func TestReplicasCreateRace(t *testing.T) { databases(t, testReplicasCreateRace) }

func testReplicasCreateRace(t *testing.T, open func() sessions.Backend) {
	a, b := replicas(t, open, Config{MaxSessions: 5}, nil)
	results := make(chan int, 20)
	for i := range 20 {
		ts := []*testServer{a, b}[i%2]
		go func() {
			results <- ts.do("POST", "/api/sessions", map[string]any{}).status
		}()
	}
	created := 0
	for range 20 {
		switch st := <-results; st {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("status %d", st)
		}
	}
	if created != 5 {
		t.Fatalf("%d sessions created, limit 5", created)
	}
}

// TestReplicasIdleReaper: a replica completes an idle session another
// replica created, once, and not while a turn of it runs elsewhere.
func TestReplicasIdleReaper(t *testing.T) { databases(t, testReplicasIdleReaper) }

func testReplicasIdleReaper(t *testing.T, open func() sessions.Backend) {
	block := make(chan struct{})
	a, b := replicas(t, open, Config{IdleTimeout: 500 * time.Millisecond}, block)
	// The busy session is prompted as soon as it exists. On a loaded
	// machine it may sit idle for the timeout before its prompt: then
	// the reaper completes it and the prompt is refused (409 not_active,
	// never accepted and then dropped), and a new one is tried.
	busy := ""
	for attempt := 1; busy == ""; attempt++ {
		id := a.create(nil)
		r := a.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "slow"})
		switch {
		case r.status == http.StatusAccepted && r.json()["queued"] != true:
			busy = id
		case r.status == http.StatusConflict && attempt < 5:
			a.expect(r, http.StatusConflict, "not_active")
			t.Logf("attempt %d: the session was reaped before its prompt", attempt)
		default:
			t.Fatalf("prompt of the busy session: %d %s", r.status, r.body)
		}
	}
	idle := a.create(nil)
	deadline := time.Now().Add(10 * time.Second)
	for b.do("GET", "/api/sessions/"+idle, nil).json()["status"] != "completed" {
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not completed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if got := b.do("GET", "/api/sessions/"+busy, nil).json(); got["status"] != "active" {
		t.Fatalf("a session with a running turn was reaped: %v", got["status"])
	}
	close(block)
	a.waitIdle(busy)
	rec, err := b.store.Snapshot(context.Background(), idle)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range rec.Events {
		if e.Type == sessions.EventStatus {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the idle session was completed %d times", n)
	}
}

// TestReplicasEventsPushed: with PostgreSQL, events cross replicas by
// notification, without polling (the poll interval here is an hour).
func TestReplicasEventsPushed(t *testing.T) {
	dsn := pgtest.DSN(t)
	if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}
	a, b := replicas(t, func() sessions.Backend {
		be, err := postgres.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		return be
	}, Config{PollInterval: time.Hour}, nil)
	id := a.create(nil)
	s := a.events(id, "")
	s.waitComment(t, "ready")
	for p := range 3 {
		b.expect(b.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "from b"}), http.StatusAccepted, "")
		for want := 2*p + 2; want <= 2*p+3; want++ { // 1 is session:started
			if f := s.next(t); f.id != strconv.Itoa(want) {
				t.Fatalf("event id %q, want %d (%v)", f.id, want, f.data)
			}
		}
		b.waitIdle(id)
	}
}
