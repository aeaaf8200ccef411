package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
)

// TestListCursorTimesAndCount: GET /api/sessions pages with nextCursor,
// filters on creation and update times, and counts up to 1000
// (totalExact false beyond).
func TestListCursorTimesAndCount(t *testing.T) {
	ts := newTestServer(t, Config{})
	base := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	b := ts.store.Backend()
	for i := range 7 {
		rec := &sessions.Record{ID: fmt.Sprint("s", i), Status: sessions.StatusActive, CreatedAt: base.Add(time.Duration(i) * time.Minute),
			UpdatedAt: base.Add(time.Duration(i+10) * time.Minute), Title: fmt.Sprint("Session ", i)}
		if err := b.Create(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(l map[string]any) string {
		var out []string
		for _, s := range l["sessions"].([]any) {
			out = append(out, s.(map[string]any)["id"].(string))
		}
		return strings.Join(out, " ")
	}
	// Pages of 3 by cursor: s6 s5 s4 | s3 s2 s1 | s0, the last without one.
	var pages []string
	path := "/api/sessions?limit=3"
	for range 4 {
		r := ts.do("GET", path, nil)
		ts.expect(r, http.StatusOK, "")
		l := r.json()
		pages = append(pages, ids(l))
		if l["total"].(float64) != float64(7-3*(len(pages)-1)) || l["totalExact"] != true {
			t.Fatalf("page %d: %s", len(pages), r.body)
		}
		next, ok := l["nextCursor"].(string)
		if !ok {
			if l["nextCursor"] != nil {
				t.Fatalf("nextCursor: %s", r.body)
			}
			break
		}
		path = "/api/sessions?limit=3&cursor=" + url.QueryEscape(next)
	}
	if got := strings.Join(pages, " | "); got != "s6 s5 s4 | s3 s2 s1 | s0" {
		t.Fatalf("pages by cursor: %s", got)
	}
	for query, want := range map[string]string{
		"createdAfter=" + base.Add(4*time.Minute).Format(time.RFC3339):                                                                     "s6 s5 s4",
		"createdBefore=" + base.Add(2*time.Minute).Format(time.RFC3339):                                                                    "s1 s0",
		"updatedAfter=" + base.Add(15*time.Minute).Format(time.RFC3339) + "&updatedBefore=" + url.QueryEscape("2026-11-27T10:16:30+01:00"): "s6 s5",
		"q=SESSION+3": "s3",
	} {
		r := ts.do("GET", "/api/sessions?"+query, nil)
		ts.expect(r, http.StatusOK, "")
		if got := ids(r.json()); got != want {
			t.Errorf("%s: %s, want %s", query, got, want)
		}
	}
	for _, query := range []string{"createdAfter=yesterday", "updatedBefore=2026-11-27", "cursor=xyz", "cursor=" + url.QueryEscape("MTIz")} {
		ts.expect(ts.do("GET", "/api/sessions?"+query, nil), http.StatusBadRequest, "bad_query")
	}

	for i := range listCountLimit {
		rec := &sessions.Record{ID: fmt.Sprint("more-", i), Status: sessions.StatusCompleted, CreatedAt: base, UpdatedAt: base}
		if err := b.Create(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
	r := ts.do("GET", "/api/sessions?limit=5", nil)
	if l := r.json(); l["total"].(float64) != listCountLimit || l["totalExact"] != false || len(l["sessions"].([]any)) != 5 {
		t.Fatalf("over %d matches: %s", listCountLimit, r.body)
	}
	r = ts.do("GET", "/api/sessions?status=active", nil)
	if l := r.json(); l["total"].(float64) != 7 || l["totalExact"] != true {
		t.Fatalf("a filtered count under the limit: %s", r.body)
	}
}
