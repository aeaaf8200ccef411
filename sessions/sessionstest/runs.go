package sessionstest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/skein-dev/skein/sessions"
)

// Run records (sessions.RunBackend) are part of the contract: every
// backend keeps them, so a workflow run can be resumed wherever its
// sessions are.

func (h *harness) runs() sessions.RunBackend {
	h.t.Helper()
	rb, ok := h.b.(sessions.RunBackend)
	if !ok {
		h.t.Fatalf("%T does not implement sessions.RunBackend", h.b)
	}
	return rb
}

func runRecord(id, workflow, status string, created int) *sessions.RunRecord {
	return &sessions.RunRecord{ID: id, Workflow: workflow, Fingerprint: "sha256:" + workflow, Status: status,
		CreatedAt: at(created), UpdatedAt: at(created), Head: []byte(`{"task":"t ` + id + `"}`),
		Steps: [][]byte{[]byte(`{"node":"a","output":"é\n"}`)}}
}

// checkRun compares a loaded run with the expected one.
func (h *harness) checkRun(want *sessions.RunRecord) {
	h.t.Helper()
	got, err := h.runs().LoadRun(h.ctx(), want.ID)
	if err != nil {
		h.t.Fatalf("LoadRun %s: %v", want.ID, err)
	}
	if got.ID != want.ID || got.Workflow != want.Workflow || got.Fingerprint != want.Fingerprint || got.Status != want.Status ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) || string(got.Head) != string(want.Head) ||
		len(got.Steps) != len(want.Steps) {
		h.t.Fatalf("LoadRun %s = %+v, want %+v", want.ID, got, want)
	}
	for i := range want.Steps {
		if string(got.Steps[i]) != string(want.Steps[i]) {
			h.t.Fatalf("LoadRun %s: step %d = %s, want %s", want.ID, i, got.Steps[i], want.Steps[i])
		}
	}
}

func testRuns(h *harness) {
	rb, ctx := h.runs(), h.ctx()
	if _, err := rb.LoadRun(ctx, "nope"); !errors.Is(err, sessions.ErrRunNotFound) {
		h.t.Fatalf("LoadRun of an unknown id: %v, want ErrRunNotFound", err)
	}
	if err := rb.UpdateRun(ctx, "nope", &sessions.RunUpdate{Status: "failed", UpdatedAt: at(1), Head: []byte("{}")}); !errors.Is(err, sessions.ErrRunNotFound) {
		h.t.Fatalf("UpdateRun of an unknown id: %v, want ErrRunNotFound", err)
	}
	r := runRecord("r1", "triage", "running", 1)
	if err := rb.CreateRun(ctx, r); err != nil {
		h.t.Fatal(err)
	}
	h.checkRun(r)
	if err := rb.CreateRun(ctx, runRecord("r1", "other", "running", 2)); !errors.Is(err, sessions.ErrRunExists) {
		h.t.Fatalf("CreateRun of a taken id: %v, want ErrRunExists", err)
	}
	h.checkRun(r)
	// updates replace the header and append steps
	for i := 0; i < 3; i++ {
		u := &sessions.RunUpdate{Status: "running", UpdatedAt: at(2 + i), Head: []byte(fmt.Sprintf(`{"next":"n%d"}`, i))}
		for j := 0; j < i; j++ {
			u.Steps = append(u.Steps, []byte(fmt.Sprintf(`{"node":"n%d.%d"}`, i, j)))
		}
		if err := rb.UpdateRun(ctx, "r1", u); err != nil {
			h.t.Fatal(err)
		}
		r.Status, r.UpdatedAt, r.Head = u.Status, u.UpdatedAt, u.Head
		r.Steps = append(r.Steps, u.Steps...)
		h.checkRun(r)
	}
	// a loaded record is a copy
	got, _ := rb.LoadRun(ctx, "r1")
	got.Head[0], got.Steps[0][0] = 'x', 'x'
	h.checkRun(r)
}

func testRunsList(h *harness) {
	rb, ctx := h.runs(), h.ctx()
	var all []sessions.RunSummary
	for i, st := range []string{"completed", "failed", "running", "completed", "max_steps"} {
		wf := "a"
		if i%2 == 1 {
			wf = "b"
		}
		// two runs share a creation time: the id breaks the tie
		rec := runRecord(fmt.Sprintf("run-%d", i), wf, st, min(i, 3))
		if err := rb.CreateRun(ctx, rec); err != nil {
			h.t.Fatal(err)
		}
		all = append(all, sessions.RunSummary{ID: rec.ID, Workflow: wf, Fingerprint: rec.Fingerprint, Status: st,
			CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Steps: 1})
	}
	slices.Reverse(all) // newest first: run-4, run-3 (same time, larger id first), run-2, ...
	pick := func(ids ...int) []sessions.RunSummary {
		var out []sessions.RunSummary
		for _, s := range all {
			for _, i := range ids {
				if s.ID == fmt.Sprintf("run-%d", i) {
					out = append(out, s)
				}
			}
		}
		return out
	}
	for _, tc := range []struct {
		f     sessions.RunFilter
		want  []sessions.RunSummary
		total int
	}{
		{sessions.RunFilter{}, all, 5},
		{sessions.RunFilter{Statuses: []string{"completed"}}, pick(0, 3), 2},
		{sessions.RunFilter{Workflow: "b"}, pick(1, 3), 2},
		{sessions.RunFilter{Limit: 2}, all[:2], 5},
		{sessions.RunFilter{Limit: 2, Offset: 4}, all[4:], 5},
		{sessions.RunFilter{Offset: 9}, nil, 5},
	} {
		got, total, err := rb.ListRuns(ctx, tc.f)
		if err != nil {
			h.t.Fatal(err)
		}
		if total != tc.total || len(got) != len(tc.want) {
			h.t.Fatalf("ListRuns(%+v) = %d rows of %d, want %d of %d", tc.f, len(got), total, len(tc.want), tc.total)
		}
		for i := range got {
			g, w := got[i], tc.want[i]
			if g.ID != w.ID || g.Workflow != w.Workflow || g.Fingerprint != w.Fingerprint || g.Status != w.Status || g.Steps != w.Steps ||
				!g.CreatedAt.Equal(w.CreatedAt) || !g.UpdatedAt.Equal(w.UpdatedAt) {
				h.t.Fatalf("ListRuns(%+v)[%d] = %+v, want %+v", tc.f, i, g, w)
			}
		}
	}
}

// testRunsReopen: run records survive reopening a durable backend.
func testRunsReopen(t *testing.T, open opener) {
	h, closeFn := open()
	r := runRecord("kept", "triage", "running", 1)
	if err := h.runs().CreateRun(h.ctx(), r); err != nil {
		t.Fatal(err)
	}
	closeFn()
	h, _ = open()
	h.checkRun(r)
}
