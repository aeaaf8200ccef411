package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestList(t *testing.T) {
	root := tempDir(t)
	writeFile(t, filepath.Join(root, "b.txt"), "bb")
	writeFile(t, filepath.Join(root, "a.txt"), "a")
	writeFile(t, filepath.Join(root, "c.json"), "{}")
	writeFile(t, filepath.Join(root, "d", "x"), "")
	p := mustNew(t, Config{Root: root})

	tests := []struct {
		glob string
		want []string
	}{
		{"", []string{"a.txt", "b.txt", "c.json", "d"}},
		{"*.txt", []string{"a.txt", "b.txt"}},
		{"[ab]*", []string{"a.txt", "b.txt"}},
		{"*.none", []string{}},
	}
	for _, tt := range tests {
		got, err := p.List(".", tt.glob)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("List(., %q) = %q, %v, want %q", tt.glob, got, err, tt.want)
		}
	}
	if _, err := p.List(".", "["); err == nil || !strings.Contains(err.Error(), `invalid glob "["`) {
		t.Errorf("List with a bad glob = %v", err)
	}
	entries, err := p.ListEntries(".", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{"a.txt", false, 1}, {"b.txt", false, 2}, {"c.json", false, 2}, {"d", true, 0}}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("ListEntries = %+v, want %+v", entries, want)
	}
	if _, err := p.List("missing", ""); err == nil || !strings.Contains(err.Error(), `list "missing"`) {
		t.Errorf("List(missing) = %v", err)
	}
}

func TestReadJSONL(t *testing.T) {
	root := tempDir(t)
	p := mustNew(t, Config{Root: root})
	writeFile(t, filepath.Join(root, "ok.jsonl"),
		"\ufeff{\"id\": 12345678901234567890, \"q\": \"a\"}\n\n  [1, 2.5]  \r\n\"s\"\nnull\ntrue")
	got, err := p.ReadJSONL("ok.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		map[string]any{"id": json.Number("12345678901234567890"), "q": "a"},
		[]any{json.Number("1"), json.Number("2.5")},
		"s", nil, true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadJSONL = %#v, want %#v", got, want)
	}

	writeFile(t, filepath.Join(root, "empty.jsonl"), "")
	if got, err := p.ReadJSONL("empty.jsonl"); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ReadJSONL(empty) = %#v, %v, want an empty list", got, err)
	}

	bad := []struct{ content, want string }{
		{"{}\n{}\n{oops}\n", "bad.jsonl:3: invalid JSON: invalid character 'o'"},
		{"1 2\n", "bad.jsonl:1: invalid JSON: more than one value on the line"},
		{"{}\n{\"a\":\n", "bad.jsonl:2: invalid JSON: unexpected end of line"},
	}
	for _, b := range bad {
		writeFile(t, filepath.Join(root, "bad.jsonl"), b.content)
		if _, err := p.ReadJSONL("bad.jsonl"); err == nil || !strings.HasPrefix(err.Error(), b.want) {
			t.Errorf("ReadJSONL(%q) = %v, want %q", b.content, err, b.want)
		}
	}
	_, err = p.ReadJSONL("../x.jsonl")
	wantRefusal(t, err)
}

func TestReadCSV(t *testing.T) {
	root := tempDir(t)
	p := mustNew(t, Config{Root: root})
	writeFile(t, filepath.Join(root, "ok.csv"), "\ufeffq,a\n\"what, exactly\",42\nb,\"multi\nline\"\n")
	header, rows, err := p.ReadCSV("ok.csv")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(header, []string{"q", "a"}) {
		t.Errorf("header = %q", header)
	}
	want := []map[string]string{{"q": "what, exactly", "a": "42"}, {"q": "b", "a": "multi\nline"}}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows = %q, want %q", rows, want)
	}

	writeFile(t, filepath.Join(root, "empty.csv"), "")
	if header, rows, err := p.ReadCSV("empty.csv"); err != nil || header != nil || len(rows) != 0 {
		t.Errorf("ReadCSV(empty) = %q, %q, %v", header, rows, err)
	}
	writeFile(t, filepath.Join(root, "only.csv"), "a,b\n")
	if header, rows, err := p.ReadCSV("only.csv"); err != nil || len(header) != 2 || len(rows) != 0 {
		t.Errorf("ReadCSV(header only) = %q, %q, %v", header, rows, err)
	}

	bad := []struct{ content, want string }{
		{"a,b\n1,2\n3\n", "bad.csv:3: wrong number of fields"},
		{"a,b,a\n1,2,3\n", `bad.csv:1: duplicate column "a" in the header`},
		{"a\n\"x\n", "bad.csv:2: extraneous or missing \" in quoted-field"},
	}
	for _, b := range bad {
		writeFile(t, filepath.Join(root, "bad.csv"), b.content)
		if _, _, err := p.ReadCSV("bad.csv"); err == nil || err.Error() != b.want {
			t.Errorf("ReadCSV(%q) = %v, want %q", b.content, err, b.want)
		}
	}
}

func TestSearch(t *testing.T) {
	tr := newTree(t)
	ws := tr.ws
	writeFile(t, filepath.Join(ws, "main.go"), "package main\n\nfunc main() {\n\tprintln(\"TODO: hello\")\n}\n")
	writeFile(t, filepath.Join(ws, "sub", "notes.md"), "TODO one\r\nnothing\nTODO two\n")
	writeFile(t, filepath.Join(ws, "bin.dat"), "TODO\x00binary")
	writeFile(t, filepath.Join(ws, "sub", ".git", "config"), "TODO in git\n") // a nested repository
	writeFile(t, filepath.Join(tr.outside, "leak.txt"), "TODO outside\n")
	writeFile(t, filepath.Join(ws, "long.txt"), "TODO "+strings.Repeat("é", 400)+"\n")
	p := mustNew(t, Config{Root: ws})
	ctx := context.Background()

	res, err := p.Search(ctx, `TODO`, ".", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range res.Matches {
		if m.File == "long.txt" {
			if len(m.Text) > maxMatchText+3 || !strings.HasSuffix(m.Text, "é...") {
				t.Errorf("long line kept as %d bytes: %q", len(m.Text), m.Text[len(m.Text)-8:])
			}
			continue
		}
		got = append(got, m.String())
	}
	want := []string{
		`main.go:4: 	println("TODO: hello")`,
		"sub/notes.md:1: TODO one",
		"sub/notes.md:3: TODO two",
	}
	if !reflect.DeepEqual(got, want) || res.Truncated {
		t.Errorf("Search = %q (truncated %v), want %q", got, res.Truncated, want)
	}

	res, err = p.Search(ctx, `TODO`, ".", "*.md", 1)
	if err != nil || len(res.Matches) != 1 || !res.Truncated {
		t.Fatalf("Search capped at 1 = %+v, %v", res, err)
	}
	if s := res.String(); s != "sub/notes.md:1: TODO one\n[truncated: showing the first 1 matches]\n" {
		t.Errorf("String() = %q", s)
	}

	res, err = p.Search(ctx, `^package`, "main.go", "", 0)
	if err != nil || len(res.Matches) != 1 {
		t.Errorf("Search in one file = %+v, %v", res, err)
	}

	// The project tier reaches the whole git work tree, still skipping .git.
	pp := mustNew(t, Config{Root: ws, Tier: Project})
	writeFile(t, filepath.Join(tr.repo, "up.txt"), "TODO up\n")
	res, err = pp.Search(ctx, `TODO up`, "..", "", 0)
	if err != nil || len(res.Matches) != 1 || res.Matches[0].File != filepath.Join(tr.repo, "up.txt") {
		t.Errorf("project Search = %+v, %v", res, err)
	}

	_, err = p.Search(ctx, `x`, "..", "", 0)
	wantRefusal(t, err, `path ".."`)
	_, err = p.Search(ctx, `x`, "dirlink_out", "", 0)
	wantRefusal(t, err)
	if _, err := p.Search(ctx, `(`, ".", "", 0); err == nil || err.Error() != "invalid regexp \"(\": missing closing )" {
		t.Errorf("bad regexp: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Search(cctx, `x`, ".", "", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Search = %v", err)
	}
}
