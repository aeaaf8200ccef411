package export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// TestForensicLog runs sessions through a store with a ForensicLog and
// reads the files back: one per session, path-escaped names, records
// written as events happen, footers on Close, and each file importable.
func TestForensicLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	log, err := NewForensicLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(1), sessions.WithEventSink(log))
	if err != nil {
		t.Fatal(err)
	}
	mustOpen(t, s, "run/stage")
	mustAppend(t, s, "run/stage", message.Message{Role: message.RoleUser, Text: "q"})
	path := filepath.Join(dir, "run%2Fstage.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != 3 || !strings.Contains(string(data), `"type":"session:started"`) {
		t.Fatalf("live file has %d records, want header, session:started and one event:\n%s", lines, data)
	}
	mustAppend(t, s, "run/stage", message.Message{Role: message.RoleAssistant, Text: "a"})
	if _, err := s.Fork(t.Context(), "run/stage", "fork", sessions.ForkOptions{KeepFirst: -1}); err != nil {
		t.Fatal(err)
	}
	// "run/stage" has left the memory store (cap 1): its footer has the
	// last state the log saw, without messages.
	if err := log.Close(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"run%2Fstage.jsonl": `"status":"running","outputs":{}`, "fork.jsonl": `"status":"running","result":"a"`} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %s:\n%s", name, want, data)
		}
		rec, _, err := ReadExport(strings.NewReader(string(data)))
		if err != nil {
			t.Fatalf("import %s: %v", name, err)
		}
		if name == "fork.jsonl" && (len(rec.Messages) != 2 || rec.ParentID != "run/stage") {
			t.Errorf("import %s: %+v", name, rec)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v", fi.Mode(), err)
	}
}

// TestForensicLogLongIDs: a session id whose escaped form is longer than
// a file name may be (255 bytes) stopped the log for the rest of the run
// (open: file name too long). Such an id now gets a file named by a
// prefix of it and a hash of the whole id, distinct for distinct ids,
// and the log goes on.
func TestForensicLogLongIDs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	log, err := NewForensicLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithEventSink(log))
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{
		strings.Repeat("a", 250),
		strings.Repeat("a", 250) + "b",
		strings.Repeat("a", 512),
		strings.Repeat("é", 256), // 512 bytes, 1,536 escaped
		strings.Repeat("/", 300),
		"short",
	}
	for _, id := range ids {
		mustOpen(t, s, id)
		mustAppend(t, s, id, message.Message{Role: message.RoleUser, Text: "q"})
	}
	if err := log.Close(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(ids) {
		t.Fatalf("%d files for %d sessions", len(entries), len(ids))
	}
	seen := map[string]bool{}
	for _, e := range entries {
		if len(e.Name()) > 255 {
			t.Errorf("file name of %d bytes", len(e.Name()))
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		rec, _, err := ReadExport(strings.NewReader(string(data)))
		if err != nil {
			t.Fatalf("import %s: %v", e.Name(), err)
		}
		seen[rec.ID] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("no file logs session %.20q...", id)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "short.jsonl")); err != nil {
		t.Error(err)
	}
}
