package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
)

// helpEntry is one row of the builtins reference: a builtin or a
// predeclared value, with its signature and one-line summary.
type helpEntry struct{ name, signature, summary, area string }

// helpEntries returns the reference's rows (docs/builtins.md), in its
// order.
func helpEntries() []helpEntry {
	var out []helpEntry
	for _, s := range builtins.Specs() {
		out = append(out, helpEntry{s.Name, s.Signature, s.Summary, s.Area})
	}
	for _, v := range builtins.Values() {
		out = append(out, helpEntry{v.Name, v.Signature, v.Summary, v.Area})
	}
	return out
}

// newHelp returns the REPL's help builtin: help() lists every builtin
// with its one-line summary, by area; help(x) (a builtin, a module such
// as fs, or a name as a string) shows its signature and summary, or a
// module's members; a function defined in the REPL shows its parameters
// and docstring.
func newHelp(w io.Writer) *starlark.Builtin {
	return starlark.NewBuiltin("help", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var x starlark.Value
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0, &x); err != nil {
			return nil, err
		}
		entries := helpEntries()
		if x == nil {
			writeHelpIndex(w, entries)
			return starlark.None, nil
		}
		name := ""
		switch x := x.(type) {
		case starlark.String:
			name = string(x)
		case *starlark.Builtin:
			name = x.Name()
			if recv := x.Receiver(); recv != nil {
				if m, ok := recv.(interface{ Name() string }); ok {
					name = m.Name() + "." + name
				}
			}
		case *starlark.Function:
			fmt.Fprintf(w, "%s%s\n", x.Name(), functionSignature(x))
			if doc := strings.TrimSpace(x.Doc()); doc != "" {
				fmt.Fprintf(w, "\n%s\n", doc)
			}
			return starlark.None, nil
		case *starlarkstruct.Module:
			name = x.Name
		case interface{ Name() string }:
			name = x.Name()
		}
		var members, suffixed []helpEntry
		for _, e := range entries {
			if e.name == name {
				fmt.Fprintf(w, "%s%s\n    %s\n", e.name, e.signature, e.summary)
				return starlark.None, nil
			}
			if strings.HasPrefix(e.name, name+".") {
				members = append(members, e)
			}
			if strings.HasSuffix(e.name, "."+name) {
				suffixed = append(suffixed, e) // a tool value named read_file is tools.read_file
			}
		}
		if len(suffixed) == 1 {
			e := suffixed[0]
			fmt.Fprintf(w, "%s%s\n    %s\n", e.name, e.signature, e.summary)
			return starlark.None, nil
		}
		if len(members) > 0 {
			writeHelpTable(w, members)
			return starlark.None, nil
		}
		if name == "" {
			name = x.String()
		}
		return nil, fmt.Errorf("%s: no reference entry for %s (help() lists the builtins; docs/builtins.md has them all)", b.Name(), name)
	})
}

// writeHelpIndex writes every entry by area.
func writeHelpIndex(w io.Writer, entries []helpEntry) {
	var areas []string
	byArea := map[string][]helpEntry{}
	for _, e := range entries {
		if _, ok := byArea[e.area]; !ok {
			areas = append(areas, e.area)
		}
		byArea[e.area] = append(byArea[e.area], e)
	}
	for i, a := range areas {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s:\n", a)
		writeHelpTable(w, byArea[a])
	}
	fmt.Fprintln(w, "\nhelp(NAME) shows a builtin's signature; docs/builtins.md has every option.")
}

// writeHelpTable writes entries as name and summary columns.
func writeHelpTable(w io.Writer, entries []helpEntry) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, e := range entries {
		fmt.Fprintf(tw, "  %s\t%s\n", e.name, e.summary)
	}
	tw.Flush()
}

// functionSignature is a Starlark function's parameter list. Param
// orders the parameters: positional ones, keyword-only ones, then *args
// and **kwargs.
func functionSignature(f *starlark.Function) string {
	n, kwonly := f.NumParams(), f.NumKwonlyParams()
	named := n
	if f.HasVarargs() {
		named--
	}
	if f.HasKwargs() {
		named--
	}
	param := func(i int) string {
		name, _ := f.Param(i)
		if d := f.ParamDefault(i); d != nil {
			name += " = " + d.String()
		}
		return name
	}
	var out []string
	for i := 0; i < named-kwonly; i++ {
		out = append(out, param(i))
	}
	if f.HasVarargs() {
		name, _ := f.Param(named)
		out = append(out, "*"+name)
	} else if kwonly > 0 {
		out = append(out, "*")
	}
	for i := named - kwonly; i < named; i++ {
		out = append(out, param(i))
	}
	if f.HasKwargs() {
		name, _ := f.Param(n - 1)
		out = append(out, "**"+name)
	}
	return "(" + strings.Join(out, ", ") + ")"
}

// resumeNotes says, once per session, that an input picked up a session
// stored before the REPL started (so a conversation goes on where an
// earlier run left it), with how to start afresh.
type resumeNotes struct {
	started time.Time
	seen    map[string]bool
}

func newResumeNotes(now time.Time) *resumeNotes {
	return &resumeNotes{started: now, seen: map[string]bool{}}
}

// check writes a note for each live session not seen before that was
// created before the REPL started.
func (r *resumeNotes) check(w io.Writer, live []sessions.Summary, where string) {
	sort.Slice(live, func(i, j int) bool { return live[i].ID < live[j].ID })
	for _, s := range live {
		if r.seen[s.ID] {
			continue
		}
		r.seen[s.ID] = true
		if !s.CreatedAt.Before(r.started) {
			continue
		}
		fmt.Fprintf(w, "resumed session '%s' from %s (created %s; %s, %s); a new id starts a fresh session\n",
			s.ID, where, s.CreatedAt.UTC().Format(time.DateTime+" UTC"), plural(s.Length, "message"), plural(s.Turns, "turn"))
	}
}
