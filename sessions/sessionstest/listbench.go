package sessionstest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// FillForList stores n sessions in b for BenchList, from workers
// goroutines at once: session i is "s<i>", created and last updated i
// seconds after a fixed time (listAt: a session a second, 100,000 over
// 28 hours), active when i%4 == 0 (else
// completed), titled "Fix bug <i>" when i%10 == 0 (else "Task <i>"),
// with metadata repoId "repo-<i%100>" and agent "agent-<i%10>"; every
// 1000th is a fork parent of the next one ("s<i+1>" has parent "s<i>").
func FillForList(b testing.TB, be sessions.Backend, n, workers int) {
	b.Helper()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				rec := &sessions.Record{ID: fmt.Sprint("s", i), Status: sessions.StatusCompleted,
					CreatedAt: listAt(i), UpdatedAt: listAt(i), Title: fmt.Sprint("Task ", i),
					Metadata: map[string]any{"repoId": fmt.Sprint("repo-", i%100), "agent": fmt.Sprint("agent-", i%10)}}
				if i%4 == 0 {
					rec.Status = sessions.StatusActive
				}
				if i%10 == 0 {
					rec.Title = fmt.Sprint("Fix bug ", i)
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

// FixturesEnv names the environment variable that, set to a directory,
// makes BenchmarkList keep the sessions it stores (in that directory for
// SQLite, in schemas of the test database for PostgreSQL) and reuse them
// in later runs, so that a benchmark run measures without storing
// 100,000 sessions first.
const FixturesEnv = "SKEIN_LIST_FIXTURES"

// FilledForList reports whether be holds the n sessions FillForList
// stores (a kept fixture); false for an empty be, and a failure of b for
// any other number of sessions.
func FilledForList(b testing.TB, be sessions.Backend, n int) bool {
	b.Helper()
	_, total, err := be.List(context.Background(), sessions.ListFilter{Limit: 1})
	switch {
	case err != nil:
		b.Fatal(err)
	case total != 0 && total != n:
		b.Fatalf("a kept fixture holds %d sessions, want %d: remove it", total, n)
	}
	return total == n
}

// listAt is the creation time of FillForList's session i.
func listAt(i int) time.Time {
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)
}

// ListCountLimit is where BenchList's listings stop counting, as skein
// serve's GET /api/sessions does.
const ListCountLimit = 1000

// ListFilter is one listing BenchList measures.
type ListFilter struct {
	Name   string
	Filter sessions.ListFilter
	Total  int // the total List must report
}

// ListFilters are the listings BenchList measures over the n sessions
// FillForList stored: a first page of 20, counted up to ListCountLimit,
// with each filter skein serve and skein sessions ls use, and a page
// deep in the listing by cursor and by offset. The time filters select
// the same number of sessions whatever n (the newest 500, the oldest
// 1000), and so does "q rare" nearly (1 and 11); the others a share of
// n.
func ListFilters(n int) []ListFilter {
	page := func(f sessions.ListFilter) sessions.ListFilter {
		f.Limit, f.CountLimit = 20, ListCountLimit
		return f
	}
	capped := func(k int) int { return min(k, ListCountLimit) }
	mid := n / 2
	rare := 0 // the titles "Fix bug 999..."
	for i := 0; i < n; i += 10 {
		if strings.HasPrefix(fmt.Sprint(i), "999") {
			rare++
		}
	}
	return []ListFilter{
		{"all", page(sessions.ListFilter{}), capped(n)},
		{"status", page(sessions.ListFilter{Statuses: []sessions.Status{sessions.StatusActive}}), capped((n + 3) / 4)},
		{"repoId", page(sessions.ListFilter{RepoID: "repo-42"}), capped(n / 100)},
		{"agent", page(sessions.ListFilter{Agent: "agent-7"}), capped(n / 10)},
		{"repoId+status", page(sessions.ListFilter{RepoID: "repo-40", Statuses: []sessions.Status{sessions.StatusActive}}), capped(n / 100)},
		{"parent", page(sessions.ListFilter{ParentID: "s5000"}), 1},
		{"q", page(sessions.ListFilter{Text: "fix BUG"}), capped(n / 10)},
		{"q rare", page(sessions.ListFilter{Text: "BUG 999"}), rare},
		{"createdAfter", page(sessions.ListFilter{CreatedAfter: listAt(n - 500)}), 500},
		{"createdBefore", page(sessions.ListFilter{CreatedBefore: listAt(1000)}), 1000},
		{"updatedAfter", page(sessions.ListFilter{UpdatedAfter: listAt(n - 500)}), 500},
		{"updatedBefore", page(sessions.ListFilter{UpdatedBefore: listAt(1000)}), 1000},
		{"status+updatedBefore", page(sessions.ListFilter{Statuses: []sessions.Status{sessions.StatusActive}, UpdatedBefore: listAt(1000)}), 250},
		{"cursor", page(sessions.ListFilter{After: &sessions.ListCursor{CreatedAt: listAt(mid), ID: fmt.Sprint("s", mid)}}), capped(mid)},
		{"offset", page(sessions.ListFilter{Offset: mid}), capped(n)},
	}
}

// ListSizes are the numbers of sessions BenchList compares.
var ListSizes = []int{10_000, 100_000}

// BenchList runs a sub-benchmark per listing of ListFilters over
// backends, which hold FillForList's sessions, one backend per entry of
// ListSizes (the same size in order). Each iteration lists once in each
// backend, in turn, so that their times are measured side by side on a
// machine whose load drifts; it reports the median milliseconds of each
// size ("ms/10000", "ms/100000") and the median of their ratio per
// iteration ("100000/10000": 1 is flat in the number of sessions), and
// checks each listing's total and page.
func BenchList(b *testing.B, backends []sessions.Backend) {
	filters := make([][]ListFilter, len(ListSizes))
	for i, n := range ListSizes {
		filters[i] = ListFilters(n)
	}
	for k, c := range filters[0] {
		b.Run(c.Name, func(b *testing.B) {
			ms := make([][]float64, len(ListSizes))
			var ratios []float64
			for b.Loop() {
				for i, be := range backends {
					c := filters[i][k]
					start := time.Now()
					list, total, err := be.List(context.Background(), c.Filter)
					ms[i] = append(ms[i], float64(time.Since(start).Nanoseconds())/1e6)
					if err != nil {
						b.Fatal(err)
					}
					if total != c.Total || len(list) != min(20, max(0, min(c.Total, ListSizes[i])-c.Filter.Offset)) && c.Name != "offset" ||
						c.Name == "offset" && len(list) != 20 {
						b.Fatalf("%s over %d: %d sessions of %d, want %d", c.Name, ListSizes[i], len(list), total, c.Total)
					}
				}
				last := len(ms[0]) - 1
				ratios = append(ratios, ms[len(ms)-1][last]/ms[0][last])
			}
			for i, n := range ListSizes {
				b.ReportMetric(median(ms[i]), fmt.Sprint("ms/", n))
			}
			b.ReportMetric(median(ratios), fmt.Sprint(ListSizes[len(ListSizes)-1], "/", ListSizes[0]))
		})
	}
}

// median returns the median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
