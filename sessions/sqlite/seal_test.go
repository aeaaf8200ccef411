package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/sessionstest"
	"github.com/skein-dev/skein/sessions/storekey"
)

// TestSealedBackend runs the conformance suites on a backend that seals
// every payload.
func TestSealedBackend(t *testing.T) {
	key := sessionstest.NewKey(t)
	t.Run("backend", func(t *testing.T) {
		sessionstest.RunBackendTests(t, func(t *testing.T) sessions.Backend {
			b, err := Open(filepath.Join(t.TempDir(), "sessions.db"), WithKey(key))
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	})
	t.Run("durable", func(t *testing.T) {
		sessionstest.RunDurableTests(t, func(t *testing.T, path string) sessions.Backend {
			b, err := Open(path, WithKey(key))
			if err != nil {
				t.Fatal(err)
			}
			return b
		})
	})
}

// TestSealed greps the database file and its WAL for a marker stored in
// every payload of a sealed session, then opens the file without the key
// and with another one.
func TestSealed(t *testing.T) {
	sessionstest.RunSealedTests(t, func(t *testing.T, path string, k *storekey.Key) sessions.Backend {
		b, err := Open(path, WithKey(k))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, func(t *testing.T, path string) []byte {
		var all []byte
		for _, p := range []string{path, path + "-wal"} {
			data, err := os.ReadFile(p)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			all = append(all, data...)
		}
		return all
	})
}

// TestLabels lists by repoId, agent and text with and without a store
// key (sessionstest.RunLabelTests).
func TestLabels(t *testing.T) {
	sessionstest.RunLabelTests(t, func(t *testing.T, path string, k *storekey.Key) sessions.Backend {
		b, err := Open(path, WithKey(k))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}, func(t *testing.T, path, id string) {
		db := rawDB(t, path)
		var meta []byte
		if err := db.QueryRow(`SELECT metadata FROM sessions WHERE id = ?`, id).Scan(&meta); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`UPDATE sessions SET metadata = ? WHERE id = ?`, string(sessionstest.DamageSealed(t, meta)), id); err != nil {
			t.Fatal(err)
		}
		db.Close()
	})
}

// newTestKey returns a new random store key.
func newTestKey(t *testing.T) *storekey.Key { return sessionstest.NewKey(t) }

// TestRotateKey rotates a store holding plain and sealed sessions to a
// new key, then checks that a rotation that meets a value it cannot open
// (sealed with a third key) fails naming that session and changes
// nothing.
func TestRotateKey(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sessions.db")
	k1, k2, k3 := newTestKey(t), newTestKey(t), newTestKey(t)
	create := func(k *storekey.Key, id string) {
		t.Helper()
		b, err := Open(path, WithKey(k))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		now := time.Now()
		if err := b.Create(ctx, &sessions.Record{ID: id, Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now, Title: "t " + id,
			Messages: []message.Message{{Role: message.RoleUser, Text: "m " + id}},
			Events:   []sessions.Event{{Seq: 1, Type: sessions.EventMessage, Time: now, Data: map[string]any{"n": id}}}}); err != nil {
			t.Fatal(err)
		}
	}
	load := func(k *storekey.Key, id string) error {
		t.Helper()
		b, err := Open(path, WithKey(k))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		rec, err := b.Load(ctx, id)
		if err == nil && (rec.Title != "t "+id || rec.Messages[0].Text != "m "+id || rec.Events[0].Data["n"] != id) {
			t.Fatalf("%s after rotating: %+v", id, rec)
		}
		return err
	}
	create(nil, "plain")
	create(k1, "sealed")
	r, err := RotateKey(ctx, path, k1, k2)
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
	// Run again (k2 to k2): values sealed with the new key stay readable.
	if _, err := RotateKey(ctx, path, k2, k2); err != nil {
		t.Fatal(err)
	}
	create(k3, "stranger")
	if _, err := RotateKey(ctx, path, k2, k1); !errors.Is(err, storekey.ErrWrongKey) || !strings.Contains(err.Error(), "'stranger'") {
		t.Fatalf("RotateKey over a value of a third key: %v, want ErrWrongKey naming 'stranger'", err)
	}
	if err := load(k2, "sealed"); err != nil {
		t.Fatalf("a failed rotation changed the store: %v", err)
	}
}
