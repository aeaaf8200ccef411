package builtins_test

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workflow"
)

var update = flag.Bool("update", false, "rewrite docs/builtins.md from the code")

const referencePath = "../docs/builtins.md"

// TestReference keeps docs/builtins.md in step with builtins.Specs.
func TestReference(t *testing.T) {
	want := builtins.Reference()
	if *update {
		if err := os.WriteFile(referencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s is out of date; run: go test ./builtins -run TestReference -update", referencePath)
	}
}

// TestEveryPredeclaredBuiltinIsDocumented checks the other direction:
// every name a script sees is in the reference or is a standard module.
func TestEveryPredeclaredBuiltinIsDocumented(t *testing.T) {
	st, err := builtins.NewState(vm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := builtins.Reference()
	for name := range st.Predeclared() {
		switch name {
		case "json", "time", "math", "struct", "argv":
			continue
		}
		if !strings.Contains(ref, "`"+name) {
			t.Errorf("predeclared %s is not in the reference", name)
		}
	}
}

// TestEventsAreDocumented fails when an event type is missing from
// docs/agents.md. The event types are the string constants named
// Event... (or event...) of the packages that write session events, so a
// new one needs no list updated here.
func TestEventsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/agents.md")
	if err != nil {
		t.Fatal(err)
	}
	types := eventConstants(t, "../sessions", "../agent", "../compact", "../workflow", ".")
	for _, want := range []string{sessions.EventMessage, agent.EventLLMCall, workflow.EventStageEnd, "subagent_start"} {
		if !slices.Contains(types, want) {
			t.Fatalf("the scan of event constants missed %s: %v", want, types)
		}
	}
	for _, typ := range types {
		if !strings.Contains(string(doc), "`"+typ+"`") {
			t.Errorf("event %s is not in docs/agents.md", typ)
		}
	}
}

// eventConstants returns the values of the string constants named
// Event[A-Z]... or event[A-Z]... declared in the non-test files of dirs.
func eventConstants(t *testing.T, dirs ...string) []string {
	var out []string
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						n := name.Name
						if i >= len(vs.Values) || len(n) < 6 || !strings.EqualFold(n[:5], "event") || !unicode.IsUpper(rune(n[5])) {
							continue
						}
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, err := strconv.Unquote(lit.Value)
							if err != nil {
								t.Fatal(err)
							}
							out = append(out, v)
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestDocsNameRealBuiltins fails when docs/ or the README calls a
// builtin that does not exist (a renamed or planned one).
func TestDocsNameRealBuiltins(t *testing.T) {
	st, err := builtins.NewState(vm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pre := st.Predeclared()
	files, _ := filepath.Glob("../docs/*.md")
	files = append(files, "../README.md")
	call := regexp.MustCompile(`\b((?:agent|llm|workflow)_[a-z_]+)\(`)
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(data), -1) {
			if _, ok := pre[m[1]]; !ok {
				t.Errorf("%s calls %s, which is not a builtin", file, m[1])
			}
		}
	}
}
