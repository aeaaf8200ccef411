package sessions

import (
	"context"
	"errors"
	"github.com/skein-dev/skein/sessions/message"
	"strings"
	"testing"
	"time"
)

func TestCompileWhereErrors(t *testing.T) {
	for _, tc := range []struct {
		src    string
		column int
		msg    string
	}{
		{"", 1, "empty expression"},
		{"turns >", 7, "unexpected token"},
		{"nope == 1", 1, "unknown name nope"},
		{`turns > 3 && bogus`, 14, "unknown name bogus"},
		{"turns + 1", 1, "expected bool"},
		{`title == 3`, 7, "mismatched types"},
	} {
		_, err := CompileWhere(tc.src)
		var we *WhereError
		if !errors.As(err, &we) {
			t.Fatalf("CompileWhere(%q) = %v, want a *WhereError", tc.src, err)
		}
		if we.Column != tc.column || !strings.Contains(we.Message, tc.msg) {
			t.Errorf("CompileWhere(%q) = column %d %q, want column %d containing %q", tc.src, we.Column, we.Message, tc.column, tc.msg)
		}
		if !strings.Contains(err.Error(), "column") {
			t.Errorf("error %q does not name the column", err)
		}
	}
}

func TestListWhere(t *testing.T) {
	ctx := context.Background()
	b := NewMemoryBackend()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string, created int, title string, meta map[string]any, turns int, msgs ...message.Message) {
		rec := &Record{ID: id, Status: StatusActive, CreatedAt: t0.Add(time.Duration(created) * time.Hour),
			UpdatedAt: t0, Title: title, Metadata: meta, Turns: turns, Messages: msgs}
		rec.FirstPrompt = FirstPrompt(message.NewTranscript(msgs))
		if err := b.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	mk("a", 1, "Fix the parser", map[string]any{"repo": "api", "n": int64(5)}, 4)
	mk("b", 2, "", map[string]any{"repo": "web"}, 1, message.Message{Role: message.RoleUser, Text: "\n  hello there  \nsecond line"})
	mk("c", 3, "", map[string]any{"repo": "api", "n": int64(1)}, 7)
	mk("d", 4, "", nil, 0)
	ids := func(rows []Summary) string {
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		src   string
		f     ListFilter
		want  string
		total int
	}{
		{`metadata.repo == "api" && turns > 3`, ListFilter{}, "c,a", 2},
		{`metadata.repo == "api"`, ListFilter{Limit: 1}, "c", 2},
		{`metadata.repo == "api"`, ListFilter{Limit: 1, Offset: 1}, "a", 2},
		{`title == "hello there"`, ListFilter{}, "b", 1},
		{`title startsWith "Fix"`, ListFilter{}, "a", 1},
		{`created > date("2026-01-01T02:30:00Z")`, ListFilter{}, "d,c", 2},
		{`parent == "" && messages == 0 && id != "d"`, ListFilter{}, "c,a", 2},
		{`(metadata.n ?? 0) >= 1`, ListFilter{}, "c,a", 2},
		{`"repo" in metadata`, ListFilter{}, "c,b,a", 3},
	} {
		w, err := CompileWhere(tc.src)
		if err != nil {
			t.Fatalf("CompileWhere(%q): %v", tc.src, err)
		}
		rows, total, err := ListWhere(ctx, b, tc.f, w)
		if err != nil {
			t.Fatalf("ListWhere(%q): %v", tc.src, err)
		}
		if got := ids(rows); got != tc.want || total != tc.total {
			t.Errorf("ListWhere(%q, %+v) = %s (total %d), want %s (total %d)", tc.src, tc.f, got, total, tc.want, tc.total)
		}
	}
	// A runtime failure names the session and suggests ??.
	w, err := CompileWhere(`metadata.n > 3`)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = ListWhere(ctx, b, ListFilter{}, w)
	if err == nil || !strings.Contains(err.Error(), "session '") || !strings.Contains(err.Error(), "??") {
		t.Errorf("ListWhere(metadata.n > 3) = %v, want an error naming the session", err)
	}
}

func TestLabel(t *testing.T) {
	long := strings.Repeat("é", 70)
	for in, want := range map[string]string{
		"":             "",
		"\n\n  x  \ny": "x",
		long:           strings.Repeat("é", 59) + "…",
		long[:120]:     long[:120], // exactly 60 characters
		"tab\there":    "tab\there",
	} {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestWhereUnknownNameHint: a misspelt name says which it likely meant.
func TestWhereUnknownNameHint(t *testing.T) {
	_, err := CompileWhere(`titl == "x"`)
	if err == nil || err.Error() != "invalid filter expression at column 1: unknown name titl (did you mean title?)" {
		t.Fatalf("got %v", err)
	}
	_, err = CompileWhere(`zzz == "x"`)
	if err == nil || err.Error() != "invalid filter expression at column 1: unknown name zzz" {
		t.Fatalf("got %v", err)
	}
}
