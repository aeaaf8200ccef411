package sessionstest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// FillForList stores n sessions in b for BenchList, from workers
// goroutines at once: session i is "s<i>", created i milliseconds after
// a fixed time, active when i%4 == 0 (else completed), with metadata
// repoId "repo-<i%100>" and agent "agent-<i%10>"; every 1000th is a fork
// parent of the next one ("s<i+1>" has parent "s<i>").
func FillForList(b testing.TB, be sessions.Backend, n, workers int) {
	b.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				rec := &sessions.Record{ID: fmt.Sprint("s", i), Status: sessions.StatusCompleted,
					CreatedAt: base.Add(time.Duration(i) * time.Millisecond), UpdatedAt: base.Add(time.Duration(i) * time.Millisecond),
					Metadata: map[string]any{"repoId": fmt.Sprint("repo-", i%100), "agent": fmt.Sprint("agent-", i%10)}}
				if i%4 == 0 {
					rec.Status = sessions.StatusActive
				}
				if i%1000 == 1 {
					rec.ParentID = fmt.Sprint("s", i-1)
				}
				if err := be.Create(context.Background(), rec); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// ListFilters are the listings BenchList measures, by name: a first page
// of 20 with each filter skein serve and skein sessions ls use.
var ListFilters = []struct {
	Name   string
	Filter sessions.ListFilter
}{
	{"all", sessions.ListFilter{Limit: 20}},
	{"status", sessions.ListFilter{Statuses: []sessions.Status{sessions.StatusActive}, Limit: 20}},
	{"repoId", sessions.ListFilter{RepoID: "repo-42", Limit: 20}},
	{"agent", sessions.ListFilter{Agent: "agent-7", Limit: 20}},
	{"repoId+status", sessions.ListFilter{RepoID: "repo-40", Statuses: []sessions.Status{sessions.StatusActive}, Limit: 20}},
	{"parent", sessions.ListFilter{ParentID: "s5000", Limit: 20}},
	{"updatedBefore", sessions.ListFilter{UpdatedBefore: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), Limit: 20}},
}

// BenchList runs a sub-benchmark of be.List per entry of ListFilters
// over the sessions FillForList stored (n of them), checking each
// listing's total.
func BenchList(b *testing.B, be sessions.Backend, n int) {
	want := map[string]int{"all": n, "status": (n + 3) / 4, "repoId": n / 100, "agent": n / 10, "repoId+status": n / 100,
		"parent": 1, "updatedBefore": min(n, 1000)}
	for _, c := range ListFilters {
		b.Run(c.Name, func(b *testing.B) {
			for b.Loop() {
				list, total, err := be.List(context.Background(), c.Filter)
				if err != nil {
					b.Fatal(err)
				}
				if total != want[c.Name] || len(list) != min(total, 20) {
					b.Fatalf("%s: %d sessions of %d, want %d", c.Name, len(list), total, want[c.Name])
				}
			}
		})
	}
}
