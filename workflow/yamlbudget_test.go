package workflow

import (
	"strings"
	"testing"
)

// TestHostileYAML: files that took gigabytes to parse are refused at
// once, with the line and the limit.
func TestHostileYAML(t *testing.T) {
	laughs := "name: lol\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		laughs += n + ": &" + n + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ",") + "]\n"
		prev = n
	}
	for _, c := range []struct{ name, data, want string }{
		{"billion laughs", laughs, "aliases expand to more than 100000 values"},
		{"flow sequences", "name: x\nnodes: " + strings.Repeat("[", 40000) + strings.Repeat("]", 40000) + "\n", "line 2: nested deeper than 64 levels"},
		{"flow mappings", "name: x\nnodes: " + strings.Repeat("{a: ", 40000) + "1" + strings.Repeat("}", 40000) + "\n", "line 2: nested deeper than 64 levels"},
		{"block sequences", "name: x\nnodes:\n" + strings.Repeat("- ", 40000) + "x\n", "line 3: nested deeper than 64 levels"},
	} {
		_, err := Parse([]byte(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s (%d bytes): err = %v, want %q", c.name, len(c.data), err, c.want)
		}
	}
	// anchors and aliases within the budget still work, and brackets in
	// quoted strings and comments do not count
	ok := "name: ok\nentry: a\nnodes:\n  a: &base {kind: fn, fn: f, prompt: \"[[[[\"}  # {{{{\n  b: *base\n"
	if err := checkYAMLShape([]byte(ok)); err != nil {
		t.Errorf("a file within the limits: %v", err)
	}
}

// FuzzParse feeds arbitrary bytes to the workflow loader: it must return
// a graph or an error, never panic or run away.
func FuzzParse(f *testing.F) {
	f.Add([]byte("name: x\nentry: a\nnodes:\n  a: {kind: fn, fn: f}\n"))
	f.Add([]byte("a: &a [1,2]\nb: [*a, *a]\n"))
	f.Add([]byte("- - - [[{a: b}]]\n"))
	f.Add([]byte("name: 'q''s'\n# [[[\nx: \"\\\"[\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(data)
		if err == nil && g == nil {
			t.Fatal("no graph and no error")
		}
	})
}
