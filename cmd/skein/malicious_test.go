package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maliciousExports are hostile session exports made at test time (too big
// to keep in the repository); the rest are files in
// sessions/export/testdata/malicious.
func maliciousExports() map[string]string {
	header := `{"_type":"header","version":1,"id":"%s","status":"active","created_at":"2020-01-01T00:00:00Z","updated_at":"2020-01-01T00:00:00Z","summary":null,"metadata":{},"parent_id":null,"child_ids":[],"branched_at":null,"turns":0,"max_turns":null,"message_count":%d,"event_count":0}` + "\n"
	deep := strings.Repeat("[", 1_000_000) + strings.Repeat("]", 1_000_000)
	return map[string]string{
		"deep-args.jsonl": strings.Replace(strings.Replace(header, "%s", "d", 1), "%d", "1", 1) +
			`{"_type":"message","index":0,"message":{"role":"assistant","content":"x","tool_calls":[{"id":"c","name":"f","arguments":{"a":` + deep + `}}]}}` + "\n",
		"huge-string-id.jsonl": strings.Replace(strings.Replace(header, "%s", strings.Repeat("x", 8<<20), 1), "%d", "0", 1),
		"deep-json.json":       `{"_type":"transcript","version":1,"id":"j","metadata":` + strings.Repeat(`{"a":`, 1_000_000) + "1" + strings.Repeat("}", 1_000_000) + "}",
	}
}

// TestImportMaliciousCorpus imports every hostile export (parent cycles,
// depth, huge strings, bad UTF-8, wrong types, duplicate seqs, unknown
// keys, ...) through `skein sessions import` into a fresh store and
// expects a clean refusal for each: exit code 1, one line on stderr
// naming the command, no panic, nothing stored.
func TestImportMaliciousCorpus(t *testing.T) {
	dir := t.TempDir()
	files, err := filepath.Glob("../../sessions/export/testdata/malicious/*")
	if err != nil || len(files) < 20 {
		t.Fatalf("corpus: %d files, %v", len(files), err)
	}
	for name, data := range maliciousExports() {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "sessions.db")
			var out, errOut bytes.Buffer
			code := skein([]string{"sessions", "import", "--store", store, file}, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
			msg := errOut.String()
			if code != exitFailed || !strings.HasPrefix(msg, "skein sessions import: ") || strings.Count(strings.TrimSuffix(msg, "\n"), "\n") > 0 {
				t.Fatalf("exit %d, stdout %q, stderr %q: want a one-line refusal", code, out.String(), short(msg))
			}
			if len(msg) > 1000 {
				t.Errorf("the refusal is %d bytes long: %q", len(msg), short(msg))
			}
			code = skein([]string{"sessions", "ls", "--store", store}, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
			if code == exitOK && strings.Contains(out.String(), "1 session") {
				t.Errorf("something was stored: %s", out.String())
			}
			t.Log(short(msg))
		})
	}
}

func short(s string) string {
	if len(s) > 300 {
		return s[:150] + "..." + s[len(s)-150:]
	}
	return s
}
