package sessionstest

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/skein-dev/skein/sessions"
)

// expectList is the reference semantics of Backend.List over wants.
func expectList(wants []*sessions.Record, f sessions.ListFilter) ([]sessions.Summary, int) {
	var all []sessions.Summary
	for _, r := range wants {
		if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status) ||
			f.ParentID != "" && r.ParentID != f.ParentID ||
			!f.UpdatedBefore.IsZero() && !r.UpdatedAt.Before(f.UpdatedBefore) ||
			!f.UpdatedAfter.IsZero() && r.UpdatedAt.Before(f.UpdatedAfter) ||
			!f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore) ||
			!f.CreatedAfter.IsZero() && r.CreatedAt.Before(f.CreatedAfter) ||
			f.RepoID != "" && metaString(r.Metadata, "repoId") != f.RepoID ||
			f.Agent != "" && metaString(r.Metadata, "agent") != f.Agent ||
			f.HasAgent && metaString(r.Metadata, "agent") == "" ||
			f.Text != "" && !containsFold(r.ID, f.Text) && !containsFold(cmp.Or(r.Title, r.FirstPrompt), f.Text) ||
			f.After != nil && !(r.CreatedAt.Before(f.After.CreatedAt) || r.CreatedAt.Equal(f.After.CreatedAt) && r.ID < f.After.ID) {
			continue
		}
		all = append(all, sessions.Summary{ID: r.ID, Status: r.Status, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
			ParentID: r.ParentID, Length: len(r.Messages), Turns: r.Turns, Children: len(r.ChildIDs),
			Title: r.Title, FirstPrompt: r.FirstPrompt, Metadata: r.Metadata})
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].CreatedAt.Equal(all[j].CreatedAt) {
			return all[i].CreatedAt.After(all[j].CreatedAt)
		}
		return all[i].ID > all[j].ID
	})
	total := len(all)
	if f.CountLimit > 0 {
		total = min(total, f.CountLimit)
	}
	all = all[min(f.Offset, len(all)):]
	if f.Limit > 0 && len(all) > f.Limit {
		all = all[:f.Limit]
	}
	return all, total
}

// containsFold reports whether s contains sub, ignoring case.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// metaString is the string at key of metadata m, "" when it is missing
// or not a string.
func metaString(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// checkList fails the test unless List(f) matches the reference over wants.
func (h *harness) checkList(wants []*sessions.Record, f sessions.ListFilter) []sessions.Summary {
	h.t.Helper()
	got, total, err := h.b.List(h.ctx(), f)
	if err != nil {
		h.t.Fatalf("List(%+v): %v", f, err)
	}
	want, wantTotal := expectList(wants, f)
	if total != wantTotal {
		h.t.Errorf("List(%+v): total %d, want %d", f, total, wantTotal)
	}
	if len(got) != len(want) {
		h.t.Fatalf("List(%+v): got %s, want %s", f, summaryIDs(got), summaryIDs(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Status != w.Status || !g.CreatedAt.Equal(w.CreatedAt) || !g.UpdatedAt.Equal(w.UpdatedAt) ||
			g.ParentID != w.ParentID || g.Length != w.Length || g.Turns != w.Turns || g.Children != w.Children ||
			g.Title != w.Title || g.FirstPrompt != w.FirstPrompt || !reflect.DeepEqual(g.Metadata, w.Metadata) {
			h.t.Fatalf("List(%+v)[%d]:\n\tgot  %+v\n\twant %+v\n(order got %s, want %s)", f, i, g, w, summaryIDs(got), summaryIDs(want))
		}
	}
	return got
}

// checkWhere fails the test unless List with the conditions of filter
// expression src (all of it: sessions.Where.Conds) keeps the sessions
// the expression keeps, in order, with their total.
func (h *harness) checkWhere(wants []*sessions.Record, src string) {
	h.t.Helper()
	w, err := sessions.CompileWhere(src)
	if err != nil {
		h.t.Fatal(err)
	}
	conds, exact := w.Conds()
	if !exact {
		h.t.Fatalf("%s: not all conditions apply in the backend: %v", src, conds)
	}
	all, _ := expectList(wants, sessions.ListFilter{})
	var want []sessions.Summary
	for i := range all {
		if ok, err := w.Match(&all[i]); err != nil {
			h.t.Fatal(err)
		} else if ok {
			want = append(want, all[i])
		}
	}
	got, total, err := h.b.List(h.ctx(), sessions.ListFilter{Conds: conds})
	if err != nil {
		h.t.Fatalf("List where %s: %v", src, err)
	}
	if summaryIDs(got) != summaryIDs(want) || total != len(want) {
		h.t.Fatalf("List where %s: %s (total %d), want %s", src, summaryIDs(got), total, summaryIDs(want))
	}
}

func summaryIDs(s []sessions.Summary) string {
	ids := make([]string, len(s))
	for i := range s {
		ids[i] = s[i].ID
	}
	return "[" + strings.Join(ids, " ") + "]"
}

func testList(h *harness) {
	var wants []*sessions.Record
	mk := func(id string, created int, status sessions.Status, msgs int) *sessions.Record {
		rec := newRecord(id, at(created))
		rec.Status = status
		rec.Messages = users(id, msgs)
		w := h.create(rec)
		wants = append(wants, w)
		return w
	}
	a := mk("a", 0, sessions.StatusActive, 4)
	mk("b", 1, sessions.StatusCompleted, 0)
	c := mk("c", 2, sessions.StatusError, 2)
	d := mk("d", 3, sessions.StatusCancelled, 1)
	e := mk("e", 4, sessions.StatusActive, 3)
	tie1 := newRecord("tie1", at(5))
	tie1.Metadata = map[string]any{"repoId": "api", "agent": "helper"}
	wants = append(wants, h.create(tie1))
	tie2 := mk("tie2", 5, sessions.StatusActive, 0)
	h.write(a, &sessions.Change{Append: users("more", 2), AddTurns: 3, UpdatedAt: at(20)})
	h.write(c, &sessions.Change{DropFirst: 1, UpdatedAt: at(21)})
	h.write(c, &sessions.Change{SetTitle: true, Title: "Fix the parser", SetMetadata: true,
		Metadata: map[string]any{"repo": "api", "n": int64(2)}, SetFirstPrompt: true, FirstPrompt: "c 1"})
	h.write(d, &sessions.Change{SetFirstPrompt: true, FirstPrompt: `Deploy 50%_\x now`})
	f1 := h.fork(a, "f1", 5, at(6))
	f2 := h.fork(a, "f2", 2, at(7))
	h.write(f2, &sessions.Change{Append: users("f2", 3), Status: sessions.StatusCompleted, UpdatedAt: at(30)})
	g := h.fork(f2, "g", 4, at(8))
	wants = append(wants, f1, f2, g)
	// repoId and agent, set after creation, of another type, changed.
	h.write(e, &sessions.Change{SetMetadata: true, Metadata: map[string]any{"repoId": "web", "agent": "bot"}})
	h.write(e, &sessions.Change{SetMetadata: true, Metadata: map[string]any{"repoId": "api", "agent": "bot"}})
	h.write(tie2, &sessions.Change{SetMetadata: true, Metadata: map[string]any{"agent": ""}})
	h.write(a, &sessions.Change{SetMetadata: true, Metadata: map[string]any{"repoId": int64(7), "agent": []any{"bot"}}})

	for _, f := range []sessions.ListFilter{
		{},
		{Statuses: []sessions.Status{sessions.StatusActive}},
		{Statuses: []sessions.Status{sessions.StatusCompleted, sessions.StatusError}},
		{Statuses: []sessions.Status{sessions.StatusCancelled, sessions.StatusCompleted, sessions.StatusError, sessions.StatusActive}},
		{ParentID: "a"},
		{ParentID: "f2"},
		{ParentID: "nobody"},
		{UpdatedBefore: at(4)},
		{UpdatedBefore: at(21)}, // strictly before: c (updated at 21) is out
		{UpdatedBefore: at(100)},
		{UpdatedBefore: t0.Add(-1)},
		{Statuses: []sessions.Status{sessions.StatusActive}, ParentID: "a"},
		{Statuses: []sessions.Status{sessions.StatusActive}, UpdatedBefore: at(10)},
		{Statuses: []sessions.Status{sessions.StatusActive}, Limit: 2, Offset: 1},
		{RepoID: "api"},
		{RepoID: "web"},
		{RepoID: "7"},
		{Agent: "bot"},
		{Agent: "helper", RepoID: "api"},
		{Agent: "bot", Statuses: []sessions.Status{sessions.StatusActive}, Limit: 1},
		{HasAgent: true}, // e and tie1: not a (a list), nor tie2 ("")
		{HasAgent: true, Statuses: []sessions.Status{sessions.StatusActive}, Limit: 1},
		{CreatedAfter: at(3)},
		{CreatedBefore: at(3)},
		{CreatedAfter: at(2), CreatedBefore: at(5)}, // at or after 2, strictly before 5
		{CreatedAfter: at(5), Statuses: []sessions.Status{sessions.StatusActive}},
		{UpdatedAfter: at(21)}, // at or after: c (21) and f2 (30) are in
		{UpdatedAfter: at(6), UpdatedBefore: at(30)},
		{UpdatedAfter: at(100)},
		{Text: "PARSER"}, // the title, any case
		{Text: "f2"},     // the id
		{Text: "c 1"},    // not the first prompt: c has a title
		{Text: "dePLOY"}, // the first prompt of a session without a title
		{Text: `50%_\x`}, // LIKE's wildcards are plain characters
		{Text: `5_%`},
		{Text: `y%`},
		{Text: "i", Statuses: []sessions.Status{sessions.StatusActive}},
		{After: &sessions.ListCursor{CreatedAt: at(5), ID: "tie2"}},
		{After: &sessions.ListCursor{CreatedAt: at(5), ID: "tie1"}, Limit: 2},
		{After: &sessions.ListCursor{CreatedAt: at(3), ID: "zzz"}, Statuses: []sessions.Status{sessions.StatusActive}},
		{After: &sessions.ListCursor{CreatedAt: t0, ID: "a"}},
		{CountLimit: 4},
		{CountLimit: 4, Limit: 2, Offset: 3},
		{CountLimit: 100},
		{CountLimit: 1, RepoID: "api"},
	} {
		h.checkList(wants, f)
	}
	// Filter expressions the backends apply (sessions.WhereCond) give
	// what the expression itself keeps.
	for _, src := range []string{`status == "active"`, `status != "active" && status != "error"`, `status in ["error", "cancelled"]`,
		`metadata.repoId == "api"`, `metadata.repoId != "api"`, `metadata.repo == "api" && turns >= 0`, `metadata.n != "2"`,
		`metadata.agent == "bot" && status in ["active", "error"]`, `turns > 2`, `turns == 3`, `3 < messages`,
		`messages <= 2 && status != "completed"`, `parent == "a"`, `parent == ""`, `parent != ""`, `id in ["a", "c", "zz"]`, `id != "a"`} {
		h.checkWhere(wants, src)
	}
	all := h.checkList(wants, sessions.ListFilter{})
	if got := summaryIDs(all); got != "[g f2 f1 tie2 tie1 e d c b a]" {
		h.t.Fatalf("List order: got %s, want newest first, ties by id descending", got)
	}
}

func testListPaging(h *harness) {
	var wants []*sessions.Record
	for i := range 7 {
		wants = append(wants, h.create(newRecord(fmt.Sprintf("s%d", i), at(i))))
	}
	var pages []sessions.Summary
	for off := 0; off < 9; off += 3 {
		pages = append(pages, h.checkList(wants, sessions.ListFilter{Limit: 3, Offset: off})...)
	}
	if got := summaryIDs(pages); got != "[s6 s5 s4 s3 s2 s1 s0]" {
		h.t.Fatalf("pages joined: %s", got)
	}
	h.checkList(wants, sessions.ListFilter{Offset: 5})
	h.checkList(wants, sessions.ListFilter{Offset: 7})
	h.checkList(wants, sessions.ListFilter{Offset: 100, Limit: 2})
	h.checkList(wants, sessions.ListFilter{Limit: 100})
	// Keyset paging: each page starts after the last session of the
	// previous one.
	var keyed []sessions.Summary
	f := sessions.ListFilter{Limit: 3}
	for range 4 {
		page := h.checkList(wants, f)
		keyed = append(keyed, page...)
		if len(page) == 0 {
			break
		}
		f.After = sessions.CursorOf(&page[len(page)-1])
	}
	if got := summaryIDs(keyed); got != "[s6 s5 s4 s3 s2 s1 s0]" {
		h.t.Fatalf("keyset pages joined: %s", got)
	}
	for _, f := range []sessions.ListFilter{{Limit: -1}, {Offset: -1}, {CountLimit: -1}} {
		if _, _, err := h.b.List(h.ctx(), f); err == nil {
			h.t.Errorf("List(%+v): no error", f)
		}
	}
}

func testDelete(h *harness) {
	ctx := h.ctx()
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 6)
	p := h.create(rec)
	c1 := h.fork(p, "c1", 4, at(1))
	c2 := h.fork(p, "c2", 6, at(2))
	g := h.fork(c1, "g", 3, at(3))

	h.wantErr("Delete of a parent", h.b.Delete(ctx, "p", false), sessions.ErrHasChildren, "p")
	h.wantErr("Delete of a middle session", h.b.Delete(ctx, "c1", false), sessions.ErrHasChildren, "c1")
	for _, r := range []*sessions.Record{p, c1, c2, g} {
		h.check(r)
	}

	mustDelete := func(id string) {
		h.t.Helper()
		if err := h.b.Delete(ctx, id, false); err != nil {
			h.t.Fatalf("Delete(%q): %v", id, err)
		}
		if ok, err := h.b.Exists(ctx, id); err != nil || ok {
			h.t.Fatalf("Exists(%q) after Delete = %v, %v", id, ok, err)
		}
		_, err := h.b.Load(ctx, id)
		h.wantErr("Load after Delete", err, sessions.ErrNotFound, id)
	}
	mustDelete("c2")
	p.ChildIDs = []string{"c1"}
	h.check(p)
	h.check(c1)
	h.check(g)

	// The parent keeps working after a fork of it is gone.
	h.write(p, &sessions.Change{Append: users("pa", 2)})
	h.write(p, &sessions.Change{DropFirst: 5})
	h.fork(p, "c3", 2, at(4))
	h.check(c1)
	h.check(g)

	mustDelete("g")
	c1.ChildIDs = nil
	h.check(c1)
	mustDelete("c1")
	mustDelete("c3")
	p.ChildIDs = nil
	h.check(p)
	mustDelete("p")
	h.checkList(nil, sessions.ListFilter{})

	// Ids are free again, with nothing left over from before.
	p = h.create(newRecord("p", at(10)))
	h.write(p, &sessions.Change{Append: users("new", 2)})
	c1 = h.fork(p, "c1", 1, at(11))
	h.write(c1, &sessions.Change{Append: users("c1new", 1)})
	h.check(p)
}

func testDeleteRecursive(h *harness) {
	ctx := h.ctx()
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 5)
	p := h.create(rec)
	c1 := h.fork(p, "c1", 5, at(1))
	h.write(c1, &sessions.Change{Append: users("c1", 2)})
	h.fork(c1, "g1", 6, at(2))
	h.fork(c1, "g2", 2, at(3))
	c2 := h.fork(p, "c2", 3, at(4))
	orec := newRecord("o", at(5))
	orec.Messages = users("o", 2)
	o := h.create(orec)
	oc := h.fork(o, "oc", 1, at(6))

	if err := h.b.Delete(ctx, "c1", true); err != nil {
		h.t.Fatalf("Delete(c1, recursive): %v", err)
	}
	for _, id := range []string{"c1", "g1", "g2"} {
		if ok, err := h.b.Exists(ctx, id); err != nil || ok {
			h.t.Fatalf("Exists(%q) after a recursive Delete of c1 = %v, %v", id, ok, err)
		}
	}
	p.ChildIDs = []string{"c2"}
	for _, r := range []*sessions.Record{p, c2, o, oc} {
		h.check(r)
	}
	h.checkList([]*sessions.Record{p, c2, o, oc}, sessions.ListFilter{})

	if err := h.b.Delete(ctx, "p", true); err != nil {
		h.t.Fatalf("Delete(p, recursive): %v", err)
	}
	h.checkList([]*sessions.Record{o, oc}, sessions.ListFilter{})
	h.check(o)
	h.check(oc)
	// recursive on a leaf is a plain delete
	if err := h.b.Delete(ctx, "oc", true); err != nil {
		h.t.Fatalf("Delete(oc, recursive): %v", err)
	}
	o.ChildIDs = nil
	h.check(o)
}

// testForgetKeepsForks checks, for a backend that can drop a session
// without the child check (sessions.Forgetter), that the forks' shared
// messages stay readable.
func testForgetKeepsForks(h *harness) {
	f, ok := h.b.(sessions.Forgetter)
	if !ok {
		h.t.Skip("not a sessions.Forgetter: Delete is the only way to drop a session, and it refuses while forks exist")
	}
	rec := newRecord("p", at(0))
	rec.Messages = users("p", 5)
	p := h.create(rec)
	c := h.fork(p, "c", 3, at(1))
	f.Forget("p")
	if ok, err := h.b.Exists(h.ctx(), "p"); err != nil || ok {
		h.t.Fatalf("Exists(p) after Forget = %v, %v", ok, err)
	}
	h.check(c)
	h.write(c, &sessions.Change{DropFirst: 1, Append: users("c", 1)})
}
