package builtins

import (
	"fmt"
	"strings"

	"github.com/skein-dev/skein/agent"
)

// Reference renders docs/builtins.md: every builtin of Specs and value of
// Values with its signature and summary, grouped by area. A test keeps the
// file in step with the code (go test ./builtins -run TestReference
// -update rewrites it).
func Reference() string {
	var b strings.Builder
	b.WriteString("# Builtins reference\n\n")
	b.WriteString("<!-- Generated from builtins.Specs by `go test ./builtins -run TestReference -update`; do not edit. -->\n\n")
	b.WriteString("Every script also has the standard modules `json`, `time`, `math` and `struct` from go.starlark.net, ")
	b.WriteString("`argv` (the script's arguments), `fail` and `print` (to stdout). Tests run by `skein test` also have ")
	b.WriteString("`assert` (starlarktest's module) and `skip(reason)`.\n\n")
	b.WriteString("Errors start with the builtin's name: `agent_session_trim: ` + \"`keep_last` must be >= 0\". ")
	b.WriteString("How errors quote names, and behaviour beyond the signatures, is in [semantics.md](semantics.md).\n")
	area := ""
	row := func(rowArea, name, signature, summary string) {
		if rowArea != area {
			area = rowArea
			fmt.Fprintf(&b, "\n## %s\n\n| builtin | summary |\n|---|---|\n", area)
		}
		fmt.Fprintf(&b, "| `%s%s` | %s |\n", name, signature, strings.ReplaceAll(summary, "|", "\\|"))
	}
	for _, s := range Specs() {
		row(s.Area, s.Name, s.Signature, s.Summary)
	}
	for _, v := range Values() {
		row(v.Area, v.Name, v.Signature, v.Summary)
	}
	b.WriteString("\n## Options\n\nAn option not given, or given as None, has its default. An unknown key, a value of the wrong type ")
	b.WriteString("or out of range is an error naming the builtin and the option.\n")
	for _, t := range optionTables() {
		writeOptionTable(&b, t)
	}
	return b.String()
}

// writeOptionTable renders one option table: its own rows, not those of
// the table it extends.
func writeOptionTable(b *strings.Builder, t *agent.Table) {
	fmt.Fprintf(b, "\n### %s\n\n%s\n", t.Title, t.Intro)
	header := false
	for _, r := range t.Rows() {
		if t.Base != nil && t.Base.Lookup(r.Name) != nil {
			continue
		}
		if !header {
			b.WriteString("\n| option | type | default | meaning |\n|---|---|---|---|\n")
			header = true
		}
		typ := r.TypeName()
		if c := r.Constraint(); c != "" {
			typ += ", " + c
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", r.Name, typ, r.DefaultText(), strings.ReplaceAll(r.Doc, "|", "\\|"))
	}
	if !header && t.Base != nil && len(t.Rows()) < len(t.Base.Rows()) {
		names := make([]string, len(t.Rows()))
		for i, r := range t.Rows() {
			names[i] = "`" + r.Name + "`"
		}
		fmt.Fprintf(b, "\nThey are: %s.\n", strings.Join(names, ", "))
	}
}
