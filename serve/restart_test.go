package serve

import (
	"net/http"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// TestDatabaseRestart restarts the PostgreSQL server under skein serve (a
// throw-away server of the test's own): /healthz must answer 503 while
// the database is down, and creates and prompts must succeed again once
// it is back (before the fix every create and prompt answered 500, "lock
// 'serve/create': conn closed", until skein was restarted, while /healthz
// said ok).
func TestDatabaseRestart(t *testing.T) {
	pg := pgtest.NewServer(t)
	if _, err := postgres.Migrate(t.Context(), pg.DSN()); err != nil {
		t.Fatal(err)
	}
	be, err := postgres.Open(t.Context(), pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	store, err := sessions.NewStore(be)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Shutdown() })
	ts := newTestServer(t, Config{Store: store, PollInterval: 50 * time.Millisecond})
	turn := func(id string) {
		t.Helper()
		ts.expect(ts.do("POST", "/api/sessions/"+id+"/prompt", map[string]any{"text": "hello"}), http.StatusAccepted, "")
		ts.waitIdle(id)
	}
	turn(ts.create(nil))
	ts.expect(ts.do("GET", "/healthz", nil), http.StatusOK, "")

	for round := range 2 {
		pg.Stop()
		ts.expect(ts.do("GET", "/healthz", nil), http.StatusServiceUnavailable, "")
		if r := ts.do("POST", "/api/sessions", nil); r.status == http.StatusCreated {
			t.Fatalf("round %d: a create succeeded with the database down", round)
		}
		pg.Start()
		back := time.Now()
		for {
			r := ts.do("POST", "/api/sessions", nil)
			if r.status == http.StatusCreated {
				t.Logf("round %d: 201 again %s after the restart", round, time.Since(back).Round(time.Millisecond))
				turn(r.json()["id"].(string))
				break
			}
			if time.Since(back) > 20*time.Second {
				t.Fatalf("round %d: still %d 20 s after the database came back: %s", round, r.status, r.body)
			}
			time.Sleep(100 * time.Millisecond)
		}
		ts.expect(ts.do("GET", "/healthz", nil), http.StatusOK, "")
	}
}
