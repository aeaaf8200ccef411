package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/postgres"
	"github.com/skein-dev/skein/sessions/postgres/pgtest"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// fillForCopy stores, through a Store over b (which it closes), sessions that use what a
// copy must keep: messages and events, a trim and a reset (history), a
// fork and a fork of a fork (lineage), title, metadata, status; two
// run records; and two repository records.
func fillForCopy(t *testing.T, b sessions.Backend) {
	t.Helper()
	ctx := t.Context()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st, err := sessions.NewStore(b, sessions.WithClock(func() time.Time { clock = clock.Add(time.Second); return clock }))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown()
	user := func(s string) *sessions.Change {
		return &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: s}}}
	}
	title := "Root"
	if _, err := st.OpenWith(ctx, "root", sessions.OpenOptions{Info: sessions.Info{Title: &title, Metadata: map[string]any{"repo": "api", "n": int64(3)}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := st.Apply(ctx, "root", user(fmt.Sprint("m", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Fork(ctx, "root", "child", sessions.ForkOptions{KeepFirst: 4, BranchedAt: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, "root", &sessions.Change{DropFirst: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, "child", user("c")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Fork(ctx, "child", "grandchild", sessions.ForkOptions{KeepFirst: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(ctx, "child", &sessions.Change{Replace: true, ReplaceWith: []message.Message{{Role: message.RoleUser, Text: "reset"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(ctx, "other", 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	rb := b.(sessions.RunBackend)
	for i, status := range []string{"completed", "running"} {
		rec := &sessions.RunRecord{ID: fmt.Sprint("run", i), Workflow: "triage", Fingerprint: "f", Status: status,
			CreatedAt: clock.Add(time.Duration(i) * time.Minute), UpdatedAt: clock, Head: []byte(`{"next":"b"}`),
			Steps: [][]byte{[]byte(`{"node":"a"}`), []byte(`{"node":"b"}`)}}
		if err := rb.CreateRun(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"api", "web"} {
		if err := b.(sessions.RepoBackend).CreateRepo(ctx, &sessions.Repo{ID: id, Path: "/srv/" + id, CreatedAt: clock.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCopied checks that to holds what from does: every session with its
// messages, events, history and lineage, and every run record.
func checkCopied(t *testing.T, from, to sessions.Backend) {
	t.Helper()
	ctx := t.Context()
	list, n, err := from.List(ctx, sessions.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if _, m, err := to.List(ctx, sessions.ListFilter{}); err != nil || m != n {
		t.Fatalf("target lists %d sessions (%v), source %d", m, err, n)
	}
	for _, s := range list {
		want, err := from.Load(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		got, err := to.Load(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		want.CreatedAt, want.UpdatedAt = want.CreatedAt.UTC(), want.UpdatedAt.UTC()
		got.CreatedAt, got.UpdatedAt = got.CreatedAt.UTC(), got.UpdatedAt.UTC()
		for i := range want.Events {
			want.Events[i].Time, got.Events[i].Time = want.Events[i].Time.UTC(), got.Events[i].Time.UTC()
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("session %s copied as\n%+v\nwant\n%+v", s.ID, got, want)
		}
		if fh, ok := from.(sessions.HistoryBackend); ok {
			wantH, err := fh.LoadAppended(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			gotH, err := to.(sessions.HistoryBackend).LoadAppended(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(gotH, wantH) {
				t.Fatalf("session %s: history %v, want %v", s.ID, gotH, wantH)
			}
		}
	}
	wantRepos, err := from.(sessions.RepoBackend).ListRepos(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotRepos, err := to.(sessions.RepoBackend).ListRepos(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range [][]sessions.Repo{wantRepos, gotRepos} {
		for i := range rs {
			rs[i].CreatedAt = rs[i].CreatedAt.UTC()
		}
	}
	if len(wantRepos) == 0 || !reflect.DeepEqual(gotRepos, wantRepos) {
		t.Fatalf("repositories copied as %+v, want %+v", gotRepos, wantRepos)
	}
	runs, _, err := from.(sessions.RunBackend).ListRuns(ctx, sessions.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		want, _ := from.(sessions.RunBackend).LoadRun(ctx, r.ID)
		got, err := to.(sessions.RunBackend).LoadRun(ctx, r.ID)
		if err != nil || !reflect.DeepEqual(got.Steps, want.Steps) || string(got.Head) != string(want.Head) || got.Status != want.Status {
			t.Fatalf("run %s copied as %+v (%v), want %+v", r.ID, got, err, want)
		}
	}
}

// testCopy copies a filled store from newFrom's backend into newTo's and
// checks the copy, the refusal of a non-empty target, and --merge.
func testCopy(t *testing.T, newFrom, newTo func(t *testing.T) func() sessions.Backend) {
	ctx := t.Context()
	openFrom := newFrom(t)
	fillForCopy(t, openFrom())
	from, to := openFrom(), newTo(t)()
	stats, err := sessions.Copy(ctx, from, to, sessions.CopyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Sessions != 4 || stats.Runs != 2 || stats.RunSteps != 4 || stats.History == 0 || stats.Repos != 2 {
		t.Fatalf("copied %+v", stats)
	}
	checkCopied(t, from, to)

	_, err = sessions.Copy(ctx, from, to, sessions.CopyOptions{})
	if !errors.Is(err, sessions.ErrNotEmpty) || !strings.Contains(err.Error(), "not empty (sessions: 4, runs: 2, repositories: 2)") {
		t.Fatalf("a second copy into the same target: %v, want ErrNotEmpty", err)
	}
	_, err = sessions.Copy(ctx, from, to, sessions.CopyOptions{Merge: true})
	if err == nil || !strings.Contains(err.Error(), "the target already holds 'root', 'child', 'grandchild', 'other', run 'run1', run 'run0'") {
		t.Fatalf("a merge of the same ids: %v", err)
	}
	more := newFrom(t)()
	now := time.Now()
	if err := more.Create(ctx, &sessions.Record{ID: "new", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
		Messages: []message.Message{{Role: message.RoleUser, Text: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	moreRepos := more.(sessions.RepoBackend)
	if err := moreRepos.CreateRepo(ctx, &sessions.Repo{ID: "api", Path: "/elsewhere/api", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := sessions.Copy(ctx, more, to, sessions.CopyOptions{Merge: true}); err == nil ||
		!strings.Contains(err.Error(), "the target already holds repository 'api' (at /srv/api, not /elsewhere/api)") {
		t.Fatalf("a merge of a repository registered with another path: %v", err)
	}
	if err := moreRepos.PutRepo(ctx, &sessions.Repo{ID: "api", Path: "/srv/api"}); err != nil {
		t.Fatal(err)
	}
	if err := moreRepos.CreateRepo(ctx, &sessions.Repo{ID: "docs", Path: "/srv/docs", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if stats, err := sessions.Copy(ctx, more, to, sessions.CopyOptions{Merge: true}); err != nil || stats.Sessions != 1 || stats.Repos != 1 {
		t.Fatalf("a merge of a new id: %+v, %v", stats, err)
	}
	if r, err := to.(sessions.RepoBackend).LoadRepo(ctx, "docs"); err != nil || r.Path != "/srv/docs" {
		t.Fatalf("repository docs after the merge: %+v, %v", r, err)
	}
}

// sqliteBackend makes a new SQLite file and returns the function that
// opens it; the test's cleanup closes what it opened.
func sqliteBackend(t *testing.T) func() sessions.Backend {
	path := filepath.Join(t.TempDir(), "sessions.db")
	return func() sessions.Backend {
		b, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
}

// postgresBackend is sqliteBackend for a new schema of the test database.
func postgresBackend(t *testing.T) func() sessions.Backend {
	dsn := pgtest.DSN(t)
	if _, err := postgres.Migrate(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}
	return func() sessions.Backend {
		b, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
}

// TestCopySQLiteToSQLite runs without a PostgreSQL server.
func TestCopySQLiteToSQLite(t *testing.T) { testCopy(t, sqliteBackend, sqliteBackend) }

func TestCopySQLiteToPostgres(t *testing.T) { testCopy(t, sqliteBackend, postgresBackend) }

func TestCopyPostgresToSQLite(t *testing.T) { testCopy(t, postgresBackend, sqliteBackend) }
