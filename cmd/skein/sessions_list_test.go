package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// TestSessionsLsCursorAndFilters runs skein sessions ls over a store of
// seven sessions created a minute apart (the last written later): pages
// by --cursor (the table's and --json's) join up to the whole listing,
// the time ranges bound creation and last write (after inclusive, before
// exclusive), and --repo, --agent and --q filter as the list API does.
func TestSessionsLsCursorAndFilters(t *testing.T) {
	store := filepath.Join(t.TempDir(), "sessions.db")
	b, err := sqlite.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for i := range 7 {
		at := base.Add(time.Duration(i) * time.Minute)
		rec := &sessions.Record{ID: fmt.Sprint("s", i), Status: sessions.StatusActive, CreatedAt: at, UpdatedAt: at,
			Title: fmt.Sprint("Task ", i), Metadata: map[string]any{"repoId": fmt.Sprint("r", i%2), "agent": fmt.Sprint("a", i%3)}}
		if i == 2 {
			rec.Title = "Fix the login bug"
		}
		if err := b.Create(t.Context(), rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Write(t.Context(), "s1", 0, &sessions.Change{UpdatedAt: base.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	ls := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := skein(append([]string{"sessions", "ls", "--store", store}, args...), stdio{out: &out, err: &errb}); code != exitOK {
			t.Fatalf("skein sessions ls %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
		}
		return out.String()
	}
	ids := func(out string) string {
		var got []string
		for _, line := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "s") && len(f) > 5 {
				got = append(got, f[0])
			}
		}
		return strings.Join(got, " ")
	}
	// Pages by the table's cursor.
	next := regexp.MustCompile(`--cursor (\S+) for the next page`)
	var pages []string
	args := []string{"--limit", "3"}
	for range 5 {
		out := ls(args...)
		pages = append(pages, ids(out))
		m := next.FindStringSubmatch(out)
		if m == nil {
			break
		}
		args = []string{"--limit", "3", "--cursor", m[1]}
	}
	if got := strings.Join(pages, " | "); got != "s6 s5 s4 | s3 s2 s1 | s0" {
		t.Errorf("pages by cursor: %s", got)
	}
	// Pages by --json's next_cursor.
	var page struct {
		Sessions   []struct{ ID string }
		Total      int
		NextCursor *string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(ls("--json", "--limit", "4")), &page); err != nil || page.NextCursor == nil || page.Total != 7 {
		t.Fatalf("--json: %+v, %v", page, err)
	}
	if err := json.Unmarshal([]byte(ls("--json", "--limit", "4", "--cursor", *page.NextCursor)), &page); err != nil ||
		len(page.Sessions) != 3 || page.Sessions[0].ID != "s2" || page.NextCursor != nil || page.Total != 3 {
		t.Fatalf("--json next page: %+v, %v", page, err)
	}
	at := func(m int) string { return base.Add(time.Duration(m) * time.Minute).Format(time.RFC3339) }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--created-after", at(4)}, "s6 s5 s4"},
		{[]string{"--created-before", at(2)}, "s1 s0"},
		{[]string{"--created-after", at(1), "--created-before", at(3)}, "s2 s1"},
		{[]string{"--updated-after", at(30)}, "s1"},
		{[]string{"--updated-before", at(3)}, "s2 s0"},
		{[]string{"--repo", "r1"}, "s5 s3 s1"},
		{[]string{"--agent", "a0", "--repo", "r0"}, "s6 s0"},
		{[]string{"--q", "LOGIN"}, "s2"},
		{[]string{"--q", "task", "--status", "active", "--created-before", at(3)}, "s1 s0"},
	} {
		if got := ids(ls(c.args...)); got != c.want {
			t.Errorf("ls %s: %s, want %s", strings.Join(c.args, " "), got, c.want)
		}
	}
}
