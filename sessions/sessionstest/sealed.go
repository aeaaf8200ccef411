package sessionstest

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/storekey"
)

// SealedMarker is the text RunSealedTests stores in every payload of a
// session; it must appear nowhere in the stored bytes.
const SealedMarker = "plaintext-marker-5b1d"

// NewKey returns a new random store key.
func NewKey(t testing.TB) *storekey.Key {
	t.Helper()
	k, err := storekey.Parse(storekey.Generate())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// RunSealedTests checks a durable backend's encryption at rest (and, for
// a sessions.RunBackend, of a workflow run record's header and steps). open
// opens the store at path with key k (nil: none); raw returns every byte
// the backend stored at path (the database file and its WAL, or the text
// of every row). A session holding SealedMarker in its messages, title,
// summary, first prompt, metadata and event data, forked and written to,
// loads and lists back whole with the key, while raw holds no marker;
// without the key, and with another key, loading and listing it fail
// with storekey.ErrNoKey and storekey.ErrWrongKey naming the session.
func RunSealedTests(t *testing.T, open func(t *testing.T, path string, k *storekey.Key) sessions.Backend, raw func(t *testing.T, path string) []byte) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	key := NewKey(t)
	h := &harness{t: t, b: open(t, path, key)}
	closeFn := closeOnce(t, h.b)
	rec := newRecord("sealed", at(0))
	rec.Title = "title " + SealedMarker
	rec.FirstPrompt = "first " + SealedMarker
	rec.Metadata = map[string]any{"repoId": "repo-1", "note": "meta " + SealedMarker}
	rec.Messages = append(richMessages(), user("user says "+SealedMarker))
	rec.Events = stamp(rec, at(0), sessions.Event{Type: sessions.EventStatus, Data: map[string]any{"note": "event " + SealedMarker}})
	want := h.create(rec)
	summary := "summary " + SealedMarker
	h.write(want, &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "reply " + SealedMarker}},
		Events:     stamp(want, at(1), sessions.Event{Type: sessions.EventMessage, Data: map[string]any{"text": "logged " + SealedMarker}}),
		SetSummary: true, Summary: &summary, SetTitle: true, Title: "new title " + SealedMarker,
		SetMetadata: true, Metadata: map[string]any{"repoId": "repo-1", "agent": "a1", "note": "meta2 " + SealedMarker},
		SetFirstPrompt: true, FirstPrompt: "first2 " + SealedMarker, UpdatedAt: at(1)})
	child := h.fork(want, "sealed-fork", 2, at(2))
	h.checkList([]*sessions.Record{child, want}, sessions.ListFilter{})
	h.checkList([]*sessions.Record{want}, sessions.ListFilter{RepoID: "repo-1"})
	h.checkList([]*sessions.Record{want}, sessions.ListFilter{Agent: "a1", Limit: 1})
	plain := h.create(newRecord("plain-neighbour", at(3)))
	runs, _ := h.b.(sessions.RunBackend)
	head := []byte(`{"task":"task ` + SealedMarker + `","output":"out ` + SealedMarker + `"}`)
	steps := [][]byte{[]byte(`{"node":"a","output":"step ` + SealedMarker + `"}`), []byte(`{"node":"b"}`)}
	if runs != nil {
		if err := runs.CreateRun(h.ctx(), &sessions.RunRecord{ID: "run-1", Workflow: "wf", Fingerprint: "f", Status: "running",
			CreatedAt: at(4), UpdatedAt: at(4), Head: []byte(`{"task":"task ` + SealedMarker + `"}`), Steps: steps[:1]}); err != nil {
			t.Fatal(err)
		}
		if err := runs.UpdateRun(h.ctx(), "run-1", &sessions.RunUpdate{Status: "done", UpdatedAt: at(5), Head: head, Steps: steps[1:]}); err != nil {
			t.Fatal(err)
		}
	}

	data := raw(t, path)
	if len(data) == 0 {
		t.Fatal("raw returned nothing")
	}
	if i := bytes.Index(data, []byte(SealedMarker)); i >= 0 {
		t.Fatalf("the stored bytes hold the plaintext marker: ...%q...", data[max(0, i-60):min(len(data), i+60)])
	}
	closeFn()

	for _, c := range []struct {
		name string
		key  *storekey.Key
		want error
	}{{"no key", nil, storekey.ErrNoKey}, {"another key", NewKey(t), storekey.ErrWrongKey}} {
		h := &harness{t: t, b: open(t, path, c.key)}
		closeOnce(t, h.b)
		for _, id := range []string{"sealed", "sealed-fork"} {
			_, err := h.b.Load(h.ctx(), id)
			h.wantErr("Load with "+c.name, err, c.want, "'"+id+"'")
		}
		_, _, err := h.b.List(h.ctx(), sessions.ListFilter{})
		h.wantErr("List with "+c.name, err, c.want, "session '")
		if c.key == nil && !strings.Contains(err.Error(), "SKEIN_STORE_KEY_FILE") {
			t.Errorf("List without a key: %q does not say how to give one", err)
		}
		if runs, ok := h.b.(sessions.RunBackend); ok {
			if _, err := runs.LoadRun(h.ctx(), "run-1"); !errors.Is(err, c.want) || !strings.Contains(err.Error(), "run 'run-1'") {
				t.Errorf("LoadRun with %s: %v, want %v naming the run", c.name, err, c.want)
			}
		}
		if _, err := h.b.Load(h.ctx(), plain.ID); err == nil || !errors.Is(err, c.want) {
			// The neighbour was sealed too (its metadata): it fails the same way.
			t.Errorf("Load of another sealed session with %s: %v, want %v", c.name, err, c.want)
		}
	}

	h = &harness{t: t, b: open(t, path, key)}
	closeOnce(t, h.b)
	h.check(want)
	h.check(child)
	h.check(plain)
	if runs, ok := h.b.(sessions.RunBackend); ok {
		got, err := runs.LoadRun(h.ctx(), "run-1")
		if err != nil || string(got.Head) != string(head) || len(got.Steps) != 2 || string(got.Steps[0]) != string(steps[0]) || string(got.Steps[1]) != string(steps[1]) {
			t.Fatalf("LoadRun of the sealed run: %+v, %v", got, err)
		}
	}
}
