package sessions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/skein-dev/skein/internal/didyoumean"
)

// Where is a compiled session filter: an expr-lang expression over one
// listing row (see WhereEnv) that must give a bool. `skein sessions ls
// --where` and the HTTP API's where parameter both use it, through
// ListWhere.
type Where struct {
	src  string
	prog *vm.Program
	// conds are the conditions the backends apply (see Conds); exact
	// reports whether they are the whole expression.
	conds []WhereCond
	exact bool
}

// WhereEnv is what a filter expression sees of a session.
type WhereEnv struct {
	ID       string         `expr:"id"`
	Title    string         `expr:"title"` // the listing's label: the title, else the first prompt
	Status   string         `expr:"status"`
	Messages int            `expr:"messages"` // current message count
	Turns    int            `expr:"turns"`
	Created  time.Time      `expr:"created"`
	Updated  time.Time      `expr:"updated"`
	Parent   string         `expr:"parent"` // "" for a root session
	Metadata map[string]any `expr:"metadata"`
}

// WhereNames lists the names a filter expression may use, in order.
var WhereNames = []string{"id", "title", "status", "messages", "turns", "created", "updated", "parent", "metadata"}

// WhereError is a filter expression that does not compile: Column is the
// 1-based column (in characters) of the problem.
type WhereError struct {
	Column  int
	Message string
}

func (e *WhereError) Error() string {
	return fmt.Sprintf("invalid filter expression at column %d: %s", e.Column, e.Message)
}

// CompileWhere compiles a filter expression: a syntax error, an unknown
// name or a result that is not a bool is a *WhereError.
func CompileWhere(src string) (*Where, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &WhereError{Column: 1, Message: "empty expression (expected a condition over " + strings.Join(WhereNames, ", ") + ")"}
	}
	prog, err := expr.Compile(src, expr.Env(WhereEnv{}), expr.AsBool())
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, &WhereError{Column: fe.Column + 1, Message: didyoumean.UnknownName(fe.Message, WhereNames)}
		}
		return nil, &WhereError{Column: 1, Message: err.Error()}
	}
	conds, exact := whereConds(src)
	return &Where{src: src, prog: prog, conds: conds, exact: exact}, nil
}

// String returns the expression's source.
func (w *Where) String() string { return w.src }

// Env returns what a filter sees of s.
func (s *Summary) Env() WhereEnv {
	meta := s.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	return WhereEnv{ID: s.ID, Title: s.Label(), Status: string(s.Status), Messages: s.Length, Turns: s.Turns,
		Created: s.CreatedAt, Updated: s.UpdatedAt, Parent: s.ParentID, Metadata: meta}
}

// Match reports whether s passes the filter. An expression that fails on
// s's values (comparing a missing metadata key, which is nil, with a
// number, say) is an error naming the session.
func (w *Where) Match(s *Summary) (bool, error) {
	out, err := expr.Run(w.prog, s.Env())
	if err != nil {
		return false, fmt.Errorf("filter %q on session '%s': %v (give missing metadata keys a default with ??, as in '(metadata.n ?? 0) > 3')",
			w.src, s.ID, firstLine(err.Error()))
	}
	ok, _ := out.(bool)
	return ok, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// ListWhere is b.List(f) keeping only the sessions w matches (all of
// them when w is nil): the page after f.Offset of at most f.Limit
// sessions, newest first, and the number that match (up to
// f.CountLimit). The conditions of w the backends apply (Where.Conds)
// go to them in f.Conds; when w has others, or f a Text the backends
// cannot match (see textInSQL), it reads every summary the rest selects
// and filters them in Go.
func ListWhere(ctx context.Context, b Backend, f ListFilter, w *Where) ([]Summary, int, error) {
	var text ListFilter // the Text matched in Go, if any
	if !textInSQL(f.Text) {
		text.Text, f.Text = f.Text, ""
	}
	if w != nil {
		f.Conds = append(f.Conds[:len(f.Conds):len(f.Conds)], w.conds...)
		if w.exact {
			w = nil
		}
	}
	if w == nil && text.Text == "" {
		return b.List(ctx, f)
	}
	if err := f.Check(); err != nil {
		return nil, 0, err
	}
	all := f
	all.Limit, all.Offset, all.CountLimit = 0, 0, 0
	rows, _, err := b.List(ctx, all)
	if err != nil {
		return nil, 0, err
	}
	var matched []Summary
	for i := range rows {
		r := &rows[i]
		ok := text.MatchesText(r.ID, r.Title, r.FirstPrompt)
		if ok && w != nil {
			if ok, err = w.Match(r); err != nil {
				return nil, 0, err
			}
		}
		if ok {
			matched = append(matched, *r)
		}
	}
	return f.Page(matched), f.Counted(len(matched)), nil
}

// textInSQL reports whether the backends match text (ListFilter.Text)
// themselves: when it has ASCII characters only (SQL's lower() folds
// those at least) and no line break.
func textInSQL(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf || text[i] == '\n' {
			return false
		}
	}
	return true
}
