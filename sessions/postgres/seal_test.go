package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sessionstest"
	"github.com/skein-dev/skein/sessions/storekey"
)

// TestSealedBackend runs the conformance suites on a backend that seals
// every payload.
func TestSealedBackend(t *testing.T) {
	pgtest.Skip(t)
	key := sessionstest.NewKey(t)
	t.Run("backend", func(t *testing.T) {
		sessionstest.RunBackendTests(t, func(t *testing.T) sessions.Backend { return openTest(t, pgtest.DSN(t), WithKey(key)) })
	})
	t.Run("durable", func(t *testing.T) {
		sessionstest.RunDurableTests(t, func(t *testing.T, path string) sessions.Backend {
			return openTest(t, pgtest.Keyed(t, path), WithKey(key))
		})
	})
}

// TestSealed selects the raw text of every row of skein's tables and
// looks for a marker stored in every payload of a sealed session, then
// opens the database without the key and with another one.
func TestSealed(t *testing.T) {
	pgtest.Skip(t)
	sessionstest.RunSealedTests(t, func(t *testing.T, path string, k *storekey.Key) sessions.Backend {
		return openTest(t, pgtest.Keyed(t, path), WithKey(k))
	}, func(t *testing.T, path string) []byte {
		b := openClosed(t, pgtest.Keyed(t, path))
		var all []byte
		for _, table := range []string{"skein_sessions", "skein_messages", "skein_events", "skein_views", "skein_runs", "skein_run_steps", "skein_locks"} {
			rows, err := b.pool.Query(t.Context(), "SELECT t::text FROM "+table+" t")
			if err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Fatal(err)
				}
				all = append(all, s...)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		return all
	})
}

// TestLabels lists by repoId, agent and text with and without a store
// key (sessionstest.RunLabelTests).
func TestLabels(t *testing.T) {
	sessionstest.RunLabelTests(t, func(t *testing.T, path string, k *storekey.Key) sessions.Backend {
		return openTest(t, pgtest.Keyed(t, path), WithKey(k))
	}, func(t *testing.T, path, id string) {
		b := openClosed(t, pgtest.Keyed(t, path))
		var meta []byte
		if err := b.pool.QueryRow(t.Context(), `SELECT metadata FROM skein_sessions WHERE id = $1`, id).Scan(&meta); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(t.Context(), `UPDATE skein_sessions SET metadata = $1 WHERE id = $2`, string(sessionstest.DamageSealed(t, meta)), id); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRotateKey rotates a schema holding plain and sealed sessions to a
// new key, then checks that a rotation that meets a value it cannot open
// (sealed with a third key) fails naming that session and changes
// nothing.
func TestRotateKey(t *testing.T) {
	pgtest.Skip(t)
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	k1, k2, k3 := sessionstest.NewKey(t), sessionstest.NewKey(t), sessionstest.NewKey(t)
	create := func(k *storekey.Key, id string) {
		t.Helper()
		b := openClosed(t, dsn, WithKey(k))
		now := time.Now()
		if err := b.Create(ctx, &sessions.Record{ID: id, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, Title: "t " + id,
			Messages: []message.Message{{Role: message.RoleUser, Text: "m " + id}},
			Events:   []sessions.Event{{Seq: 1, Type: sessions.EventMessage, Time: now, Data: map[string]any{"n": id}}}}); err != nil {
			t.Fatal(err)
		}
	}
	load := func(k *storekey.Key, id string) error {
		t.Helper()
		rec, err := openClosed(t, dsn, WithKey(k)).Load(ctx, id)
		if err == nil && (rec.Title != "t "+id || rec.Messages[0].Text != "m "+id || rec.Events[0].Data["n"] != id) {
			t.Fatalf("%s after rotating: %+v", id, rec)
		}
		return err
	}
	create(nil, "plain")
	create(k1, "sealed")
	r, err := RotateKey(ctx, dsn, k1, k2)
	if err != nil || r.Sessions != 2 || r.Messages != 2 || r.Events != 2 {
		t.Fatalf("RotateKey: %+v, %v", r, err)
	}
	for _, id := range []string{"plain", "sealed"} {
		if err := load(k2, id); err != nil {
			t.Fatal(err)
		}
		if err := load(k1, id); !errors.Is(err, storekey.ErrWrongKey) {
			t.Fatalf("%s with the old key after rotating: %v", id, err)
		}
	}
	create(k3, "stranger")
	if _, err := RotateKey(ctx, dsn, k2, k1); !errors.Is(err, storekey.ErrWrongKey) || !strings.Contains(err.Error(), "'stranger'") {
		t.Fatalf("RotateKey over a value of a third key: %v, want ErrWrongKey naming 'stranger'", err)
	}
	if err := load(k2, "sealed"); err != nil {
		t.Fatalf("a failed rotation changed the store: %v", err)
	}
}
