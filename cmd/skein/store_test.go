package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDefaultStoreIsUserOnly runs a pipeline with the default store and
// checks that .skein/ and its database are created readable by the user
// only.
func TestDefaultStoreIsUserOnly(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("SKEIN_STORE", "")
	if err := os.WriteFile("p.star", []byte(`agent_session_inject(agent_session_open("s"), {"role": "user", "content": "hi"})`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := skein([]string{"run", "p.star"}, stdio{in: &bytes.Buffer{}, out: &out, err: &out}); code != exitOK {
		t.Fatalf("skein run exited %d: %s", code, out.String())
	}
	for name, want := range map[string]os.FileMode{".skein": 0o700, filepath.Join(".skein", "sessions.db"): 0o600} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %v, want %v", name, got, want)
		}
	}
}

// TestExportFileIsUserOnly checks that `skein sessions export -o` writes
// a file readable by the user only.
func TestExportFileIsUserOnly(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("SKEIN_STORE", "")
	if err := os.WriteFile("p.star", []byte(`agent_session_inject(agent_session_open("s"), {"role": "user", "content": "hi"})`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, args := range [][]string{{"run", "p.star"}, {"sessions", "export", "s", "-o", "s.jsonl"}} {
		if code := skein(args, stdio{in: &bytes.Buffer{}, out: &out, err: &out}); code != exitOK {
			t.Fatalf("skein %v exited %d: %s", args, code, out.String())
		}
	}
	fi, err := os.Stat("s.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("export file mode %v, want 0600", got)
	}
}
