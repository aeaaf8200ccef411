package rowstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/storekey"
)

// SummaryColumns are the columns a session listing selects from the
// sessions table (aliased s; children counts its forks there), in the
// order SummaryRow.Targets scans them.
const SummaryColumns = `id, status, created_at, updated_at, parent_id, length, turns,
	(SELECT count(*) FROM %[1]s c WHERE c.parent_id = s.id), title, first_prompt, metadata,
	title_crc, first_prompt_crc, metadata_crc`

// SummaryRow is one row of a session listing as stored.
type SummaryRow struct {
	s                                 sessions.Summary
	status                            string
	created, updated                  int64
	parentID, title, firstPrompt      *string
	metadata                          []byte
	titleSum, firstPromptSum, metaSum *int64
}

// Targets returns the scan destinations of SummaryColumns.
func (r *SummaryRow) Targets() []any {
	return []any{&r.s.ID, &r.status, &r.created, &r.updated, &r.parentID, &r.s.Length, &r.s.Turns, &r.s.Children,
		&r.title, &r.firstPrompt, &r.metadata, &r.titleSum, &r.firstPromptSum, &r.metaSum}
}

// Summary returns the scanned row as a listing entry, its payloads
// checked or opened with k.
func (r *SummaryRow) Summary(k *storekey.Key) (sessions.Summary, error) {
	s := r.s
	s.Status = sessions.Status(r.status)
	s.ParentID = deref(r.parentID)
	var err error
	if s.Title, err = DecodeText(k, FieldTitle, r.title, r.titleSum); err != nil {
		return s, sessions.IDError(s.ID, err)
	}
	if s.FirstPrompt, err = DecodeText(k, FieldFirstPrompt, r.firstPrompt, r.firstPromptSum); err != nil {
		return s, sessions.IDError(s.ID, err)
	}
	if s.Metadata, err = decodeObject(k, FieldMetadata, r.metadata, r.metaSum); err != nil {
		return s, sessions.IDError(s.ID, err)
	}
	s.CreatedAt, s.UpdatedAt = DecodeTime(r.created), DecodeTime(r.updated)
	return s, nil
}

// RunColumns are the columns a run listing selects, in the order
// RunRow.Targets scans them.
const RunColumns = `id, workflow, fingerprint, status, created_at, updated_at, steps`

// RunRow is one row of a run listing as stored.
type RunRow struct {
	s                sessions.RunSummary
	created, updated int64
}

// Targets returns the scan destinations of RunColumns.
func (r *RunRow) Targets() []any {
	return []any{&r.s.ID, &r.s.Workflow, &r.s.Fingerprint, &r.s.Status, &r.created, &r.updated, &r.s.Steps}
}

// Summary returns the scanned row as a listing entry.
func (r *RunRow) Summary() sessions.RunSummary {
	s := r.s
	s.CreatedAt, s.UpdatedAt = DecodeTime(r.created), DecodeTime(r.updated)
	return s
}

// Filter is the WHERE clause of a listing and its arguments. Conditions
// use ? placeholders (a backend that numbers its placeholders rewrites
// them).
type Filter struct {
	conds []string
	Args  []any
}

// whereIn adds "column IN (values...)" when values is not empty.
func whereIn[S ~string](f *Filter, column string, values []S) {
	if len(values) == 0 {
		return
	}
	f.conds = append(f.conds, column+" IN (?"+strings.Repeat(", ?", len(values)-1)+")")
	for _, v := range values {
		f.Args = append(f.Args, string(v))
	}
}

// where adds the condition cond with its argument.
func (f *Filter) where(cond string, arg any) {
	f.conds = append(f.conds, cond)
	f.Args = append(f.Args, arg)
}

// Clause returns " WHERE cond AND ...", or "" for no condition.
func (f *Filter) Clause() string {
	if len(f.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(f.conds, " AND ")
}

// Dialect is what a backend's SQL writes its own way in a listing.
type Dialect struct {
	// MetaString returns a condition, and its arguments, that holds when
	// the listing's metadata column has the string value under key (a
	// sessions.WhereCond key: letters, digits, underscores).
	MetaString func(key, value string) (string, []any)
	// FewOrder, when set, is the ORDER BY of a page of a text search
	// (Text) whose count found at most fewMatches sessions: an order
	// that no index gives (ListOrder's, computed), so that the database
	// reads the few matches through the text index and sorts them,
	// instead of reading every session newest first for a page that
	// fewer than its limit fill (which a planner that overestimates the
	// matches of a text would choose).
	FewOrder string
	// TextIndex, when set, returns a condition, and its arguments, that
	// holds for every session whose id or label (title, else first
	// prompt) contains text, ignoring ASCII case, and that a text index
	// answers (it may hold for others too: the listing also checks the
	// text itself); "" when the index cannot help with text.
	TextIndex func(text string) (string, []any)
}

// SessionFilter returns the WHERE clause of a session listing.
func SessionFilter(lf sessions.ListFilter, d Dialect) (*Filter, error) {
	if err := lf.Check(); err != nil {
		return nil, err
	}
	var f Filter
	whereIn(&f, "status", lf.Statuses)
	if lf.ParentID != "" {
		f.where("parent_id = ?", lf.ParentID)
	}
	if lf.RepoID != "" {
		f.where("repo_id = ?", lf.RepoID)
	}
	if lf.Agent != "" {
		f.where("agent = ?", lf.Agent)
	}
	if lf.HasAgent {
		f.where("agent > ?", "") // neither NULL nor ''
	}
	for _, c := range []struct {
		name, cond string
		t          time.Time
	}{
		{"created after", "created_at >= ?", lf.CreatedAfter},
		{"created before", "created_at < ?", lf.CreatedBefore},
		{"updated after", "updated_at >= ?", lf.UpdatedAfter},
		{"updated before", "updated_at < ?", lf.UpdatedBefore},
		// A session is updated no earlier than it is created: one
		// updated before t was created before t, which the listing's
		// index on the creation time can seek to.
		{"updated before", "created_at < ?", lf.UpdatedBefore},
		// The indexed minute of the last update (Touched) narrows the
		// update times to the sessions written about then.
		{"updated after", "touched >= ?", lf.UpdatedAfter},
		{"updated before", "touched <= ?", lf.UpdatedBefore},
	} {
		if c.t.IsZero() {
			continue
		}
		t, err := EncodeTime(c.t)
		if err != nil {
			return nil, fmt.Errorf("list: %s: %w", c.name, err)
		}
		if strings.HasPrefix(c.cond, "touched") {
			t = Touched(t)
		}
		f.where(c.cond, t)
	}
	if lf.Text != "" {
		// The title, else the first prompt (sessions.ListFilter.Text);
		// LIKE with the text's own % _ \ escaped, on lower() of both.
		p := "%" + likeEscaper().Replace(strings.ToLower(lf.Text)) + "%"
		f.conds = append(f.conds, `(lower(id) LIKE ? ESCAPE '\' OR lower(`+LabelSQL+`) LIKE ? ESCAPE '\')`)
		f.Args = append(f.Args, p, p)
		if d.TextIndex != nil {
			if cond, args := d.TextIndex(lf.Text); cond != "" {
				f.conds = append(f.conds, cond)
				f.Args = append(f.Args, args...)
			}
		}
	}
	for _, c := range lf.Conds {
		if err := f.cond(c, d); err != nil {
			return nil, err
		}
	}
	if lf.After != nil {
		t, err := EncodeTime(lf.After.CreatedAt)
		if err != nil {
			return nil, fmt.Errorf("list: after: %w", err)
		}
		// A row value, which both databases compare in the order of
		// the (created_at, id) indexes and seek to.
		f.conds = append(f.conds, "(created_at, id) < (?, ?)")
		f.Args = append(f.Args, t, lf.After.ID)
	}
	return &f, nil
}

// LabelSQL is a session row's label in SQL: its title, else its first
// prompt (sessions.ListFilter.Text matches it and the id). PostgreSQL's
// trigram index is on lower() of this expression, written the same way.
const LabelSQL = `CASE WHEN coalesce(title, '') = '' THEN coalesce(first_prompt, '') ELSE title END`

// TouchedUnit is the unit of a session row's column touched: the time of
// the session's last write (updated_at) rounded down to a minute,
// indexed, so that a listing by update time reads only the sessions
// written about then. Rounded, it changes once a minute at most, so a
// write rarely changes the row or its index entry for it.
const TouchedUnit = int64(60e9)

// Touched returns the value of column touched for updated_at t (both
// encoded: EncodeTime).
func Touched(t int64) int64 { return t - t%TouchedUnit }

// condColumn is the column of a WhereCond field ("" for none). (Switches,
// not maps: a map literal would be built at every start.)
func condColumn(field string) string {
	switch field {
	case "id", "status", "turns":
		return field
	case "parent":
		return "coalesce(parent_id, '')"
	case "messages":
		return "length"
	}
	return ""
}

// sqlOp is the SQL operator of a WhereCond's ("" for none).
func sqlOp(op string) string {
	switch op {
	case "==":
		return "="
	case "!=":
		return "<>"
	case "<", "<=", ">", ">=":
		return op
	}
	return ""
}

// cond adds the condition c (sessions.WhereCond, with its meaning).
func (f *Filter) cond(c sessions.WhereCond, d Dialect) error {
	if key, ok := c.MetadataKey(); ok {
		v, _ := c.Value.(string)
		cond, args := d.MetaString(key, v)
		if c.Op == "!=" {
			cond = "NOT coalesce(" + cond + ", FALSE)"
		}
		f.conds = append(f.conds, cond)
		f.Args = append(f.Args, args...)
		return nil
	}
	col, op := condColumn(c.Field), sqlOp(c.Op)
	switch v := c.Value.(type) {
	case []string:
		if c.Op == "in" && col != "" {
			whereIn(f, col, v)
			return nil
		}
	case string, int64:
		if col != "" && op != "" {
			f.where(col+" "+op+" ?", v)
			return nil
		}
	}
	return fmt.Errorf("list: condition %s cannot be applied", c)
}

// likeEscaper escapes the wildcards of a LIKE pattern (with ESCAPE '\'),
// made on first use.
var likeEscaper = sync.OnceValue(func() *strings.Replacer { return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`) })

// RunFilter returns the WHERE clause of a run listing.
func RunFilter(rf sessions.RunFilter) *Filter {
	var f Filter
	whereIn(&f, "status", rf.Statuses)
	if rf.Workflow != "" {
		f.where("workflow = ?", rf.Workflow)
	}
	return &f
}

// ListOrder is the order of every listing: newest first, by creation
// time, then id, descending.
const ListOrder = "created_at DESC, id DESC"

// Pager is a backend's read of one page of a listing: in one read
// transaction, the count query's one integer, and each row of the rows
// query (which rows returns for that count) handed to each with the
// function that scans it. Both queries use ? placeholders.
type Pager interface {
	ReadPage(ctx context.Context, count string, countArgs []any, rows func(total int) (string, []any),
		each func(scan func(dest ...any) error) error) (int, error)
}

// fewMatches is how many matches of a text search Dialect.FewOrder
// sorts.
const fewMatches = 1000

// listPage reads one page of a listing of table: how many rows match f,
// and columns of those rows (the table aliased s) in ListOrder, or
// fewOrder when that is set and at most fewMatches match, limit (0:
// all, which the database writes as noLimit) and offset applied, each
// scanned into the targets of a new row.
func listPage[R any](ctx context.Context, p Pager, table, countTable, columns string, f *Filter, limit, offset, countLimit int, noLimit any,
	fewOrder string, newRow func() (*R, []any)) ([]*R, int, error) {
	var page any = noLimit
	if limit > 0 {
		page = limit
	}
	count, countArgs := "SELECT count(*) FROM "+countTable+f.Clause(), f.Args
	if countLimit > 0 {
		count = "SELECT count(*) FROM (SELECT 1 FROM " + countTable + f.Clause() + " LIMIT ?) c"
		countArgs = append(slices.Clone(f.Args), countLimit)
	}
	var out []*R
	rows := func(total int) (string, []any) {
		order := ListOrder
		if fewOrder != "" && total <= fewMatches && (countLimit == 0 || total < countLimit) {
			order = fewOrder
		}
		return "SELECT " + columns + " FROM " + table + " s" + f.Clause() + " ORDER BY " + order + " LIMIT ? OFFSET ?",
			append(slices.Clone(f.Args), page, offset)
	}
	total, err := p.ReadPage(ctx, count, countArgs, rows,
		func(scan func(dest ...any) error) error {
			r, targets := newRow()
			if err := scan(targets...); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	return out, total, err
}

// List is sessions.Backend.List over p in dialect d, the sessions being in table;
// countTable is where the matching sessions are counted (a table with
// the filter's columns that is cheaper to count than table, or table);
// noLimit is the database's LIMIT for no limit. Payloads are opened with
// k.
//
// With a key, a sealed session's title, first prompt and metadata are
// ciphertext to the database, so SQL cannot match them: the filters on
// them (Text, the metadata conditions of Conds) then run here, on the
// opened values, over every session the other filters keep, and Limit,
// Offset and the total are applied after them. RepoID and Agent stay in
// SQL: the store writes the columns repo_id and agent in clear
// (Labels).
func List(ctx context.Context, p Pager, k *storekey.Key, d Dialect, table, countTable string, noLimit any, f sessions.ListFilter) ([]sessions.Summary, int, error) {
	sqlFilter, goFilter := f, sessions.ListFilter{}
	if k != nil {
		goFilter.Text = f.Text
		sqlFilter.Text, sqlFilter.Conds = "", nil
		for _, c := range f.Conds {
			if _, ok := c.MetadataKey(); ok {
				goFilter.Conds = append(goFilter.Conds, c)
			} else {
				sqlFilter.Conds = append(sqlFilter.Conds, c)
			}
		}
	}
	inGo := goFilter.Text != "" || len(goFilter.Conds) > 0
	if inGo {
		sqlFilter.Limit, sqlFilter.Offset, sqlFilter.CountLimit = 0, 0, 0
	}
	q, err := SessionFilter(sqlFilter, d)
	if err != nil {
		return nil, 0, err
	}
	fewOrder := ""
	if sqlFilter.Text != "" {
		fewOrder = d.FewOrder
	}
	rows, total, err := listPage(ctx, p, table, countTable, fmt.Sprintf(SummaryColumns, table), q, sqlFilter.Limit, sqlFilter.Offset, sqlFilter.CountLimit, noLimit,
		fewOrder, func() (*SummaryRow, []any) { r := &SummaryRow{}; return r, r.Targets() })
	if err != nil {
		return nil, 0, fmt.Errorf("list: %w", err)
	}
	out := make([]sessions.Summary, 0, len(rows))
	for _, r := range rows {
		s, err := r.Summary(k)
		if err != nil {
			return nil, 0, fmt.Errorf("list: %w", err)
		}
		if inGo && !(goFilter.MatchesText(s.ID, s.Title, s.FirstPrompt) && sessions.MatchConds(goFilter.Conds, &s)) {
			continue
		}
		out = append(out, s)
	}
	if inGo {
		total = f.Counted(len(out))
		out = out[min(f.Offset, len(out)):]
		if f.Limit > 0 && len(out) > f.Limit {
			out = out[:f.Limit]
		}
	}
	return out, total, nil
}

// ListRuns is sessions.RunBackend.ListRuns over p, the runs being in
// table; noLimit is as for List.
func ListRuns(ctx context.Context, p Pager, table string, noLimit any, f sessions.RunFilter) ([]sessions.RunSummary, int, error) {
	rows, total, err := listPage(ctx, p, table, table, RunColumns, RunFilter(f), f.Limit, f.Offset, 0, noLimit, "",
		func() (*RunRow, []any) { r := &RunRow{}; return r, r.Targets() })
	if err != nil {
		return nil, 0, fmt.Errorf("list runs: %w", err)
	}
	out := make([]sessions.RunSummary, len(rows))
	for i, r := range rows {
		out[i] = r.Summary()
	}
	return out, total, nil
}
