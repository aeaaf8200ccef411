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
	if lines := strings.Count(string(data), "\n"); lines != 2 {
		t.Fatalf("live file has %d records, want header and one event:\n%s", lines, data)
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
