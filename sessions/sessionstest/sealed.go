package sessionstest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

// RunLabelTests checks that a durable backend's listings filter on the
// metadata's repoId and agent, and on text, the same with a store key as
// without, and with a key on repoId and agent in the database: open
// opens the store at path with key k (nil: none); damage makes the
// stored metadata of session id unreadable (bytes that do not open). In
// a plain store and in a sealed one, the same sessions (one whose
// metadata a write moves to another repository, one whose title a
// write changes, one deleted) list the same way for each filter; then,
// with one session's metadata damaged, a listing of everything fails
// while the listings by repoId and agent that leave that session out
// still succeed: they did not open it.
func RunLabelTests(t *testing.T, open func(t *testing.T, path string, k *storekey.Key) sessions.Backend, damage func(t *testing.T, path, id string)) {
	filters := []sessions.ListFilter{
		{RepoID: "r1"}, {Agent: "a2"}, {RepoID: "r1", Agent: "a1"}, {RepoID: "r2", Statuses: []sessions.Status{sessions.StatusCompleted}},
		{RepoID: "r1", Limit: 1, CountLimit: 10}, {RepoID: "r1", Offset: 1}, {RepoID: "none"}, {Agent: "a1", Text: "work"},
		{Text: "renamed"}, {Text: "first"}, {Text: "FIX"}, {Text: "gone"},
	}
	results := map[bool][]string{}
	for _, sealed := range []bool{false, true} {
		var k *storekey.Key
		if sealed {
			k = NewKey(t)
		}
		path := filepath.Join(t.TempDir(), "sessions.db")
		h := &harness{t: t, b: open(t, path, k)}
		closeFn := closeOnce(t, h.b)
		var wants []*sessions.Record
		for i, m := range []map[string]any{
			{"repoId": "r1", "agent": "a1"}, {"repoId": "r1", "agent": "a2"}, {"repoId": "r2", "agent": "a1"},
			{"repoId": "r3", "agent": "a2"}, {"agent": "a1"}, {"repoId": true}, nil, {"repoId": "r1", "agent": "a1"},
		} {
			rec := newRecord(fmt.Sprint("s", i), at(i))
			rec.Metadata, rec.Title = m, fmt.Sprint("Fix work item ", i)
			if i == 4 {
				rec.Title, rec.FirstPrompt = "", "first prompt here"
			}
			if i == 2 {
				rec.Status = sessions.StatusCompleted
			}
			wants = append(wants, h.create(rec))
		}
		// s3 moves to r1 (its labels written with the metadata), s1
		// gets a new title, s7 is deleted.
		h.write(wants[3], &sessions.Change{SetMetadata: true, Metadata: map[string]any{"repoId": "r1", "agent": "a2"}, UpdatedAt: at(10)})
		h.write(wants[1], &sessions.Change{SetTitle: true, Title: "Renamed", UpdatedAt: at(11)})
		if err := h.b.Delete(h.ctx(), "s7", false); err != nil {
			t.Fatal(err)
		}
		wants = wants[:7]
		for _, f := range filters {
			got := h.checkList(wants, f)
			_, total, _ := h.b.List(h.ctx(), f)
			results[sealed] = append(results[sealed], fmt.Sprint(summaryIDs(got), " ", total))
		}
		if !sealed {
			closeFn()
			continue
		}
		closeFn()
		damage(t, path, "s2")
		h.b = open(t, path, k)
		closeFn = closeOnce(t, h.b)
		if _, _, err := h.b.List(h.ctx(), sessions.ListFilter{}); !errors.Is(err, sessions.ErrCorrupt) && !errors.Is(err, storekey.ErrDamaged) {
			t.Fatalf("List of everything with s2's metadata damaged: %v, want it to fail", err)
		}
		for _, f := range []sessions.ListFilter{{RepoID: "r1"}, {Agent: "a2"}, {RepoID: "r1", Agent: "a1"}} {
			h.checkList(wants, f)
		}
		closeFn()
	}
	if fmt.Sprint(results[false]) != fmt.Sprint(results[true]) {
		t.Errorf("listings differ:\n\tplain  %v\n\tsealed %v", results[false], results[true])
	}
}

// DamageSealed returns a sealed JSON value as stored (a JSON string of
// the base64 envelope) with the last byte of its envelope changed: it no
// longer opens (storekey.ErrDamaged). For RunLabelTests' damage.
func DamageSealed(t testing.TB, stored []byte) []byte {
	t.Helper()
	var b64 string
	if err := json.Unmarshal(stored, &b64); err != nil {
		t.Fatalf("not a sealed value: %s: %v", stored, err)
	}
	env, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	env[len(env)-1] ^= 1
	out, _ := json.Marshal(base64.StdEncoding.EncodeToString(env))
	return out
}
