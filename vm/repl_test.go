package vm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"
)

// lineSource returns a REPL line function over src and records whether
// each line was asked for as a continuation.
func lineSource(src string, prompts *[]bool) func(bool) (string, error) {
	r := bufio.NewReader(strings.NewReader(src))
	return func(continued bool) (string, error) {
		if prompts != nil {
			*prompts = append(*prompts, continued)
		}
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) && line != "" {
			return line, nil
		}
		return line, err
	}
}

// transcript runs every input of src and returns what a piped REPL would
// show: values, "error: ..." lines and "meta: ..." lines.
func transcript(t *testing.T, r *REPL, src string) string {
	t.Helper()
	next := lineSource(src, nil)
	var out strings.Builder
	for {
		in, err := r.Read(next)
		if errors.Is(err, io.EOF) {
			return out.String()
		}
		if err != nil {
			fmt.Fprintf(&out, "error: %s\n", FormatError(err))
			continue
		}
		if in.Meta != "" {
			fmt.Fprintf(&out, "meta: %s\n", in.Meta)
			continue
		}
		v, err := r.Eval(context.Background(), in)
		if err != nil {
			fmt.Fprintf(&out, "error: %s\n", FormatError(err))
			continue
		}
		if v != nil && v != starlark.None {
			fmt.Fprintln(&out, v)
		}
	}
}

func newREPL(t *testing.T, root string) (*REPL, *strings.Builder) {
	t.Helper()
	var printed strings.Builder
	st, err := New(Options{Root: root, Stdout: &printed})
	if err != nil {
		t.Fatal(err)
	}
	return NewREPL(st), &printed
}

func TestREPLInputs(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"expression", "1 + 2\n", "3\n"},
		{"repr of strings", "'a' + 'b'\n", "\"ab\"\n"},
		{"None is not printed", "None\n", ""},
		{"globals persist", "x = 20\nx + 1\nx = x * 2\nx\n", "21\n40\n"},
		{"underscore", "6 * 7\n_ + 1\n_\n", "42\n43\n43\n"},
		{"None does not rebind underscore", "5\nNone\n_\n", "5\n5\n"},
		{"def with blank line", "def f(n):\n    return n * 2\n\nf(4)\n", "8\n"},
		{"def ended by the next line", "def f(n):\n    return n * 2\nf(5)\n", "10\n"},
		{"if else", "if True:\n    y = 1\nelse:\n    y = 2\n\ny\n", "1\n"},
		{"def at end of input", "def g():\n    return 1", ""},
		{"brackets span lines", "[1,\n 2,\n 3]\n", "[1, 2, 3]\n"},
		{"top-level while", "n = 0\nwhile n < 3:\n    n += 1\n\nn\n", "3\n"},
		{"blank and comment lines", "\n\n# nothing\n   \n1\n", "1\n"},
		{"semicolons", "a = 1; b = 2\na + b\n", "3\n"},
		{"meta command", ":help\n  :sessions  \n1\n", "meta: :help\nmeta: :sessions\n1\n"},
		{"meta after a def", "def f():\n    pass\n:quit\n", "meta: :quit\n"},
		{"set and recursion", "s = set([1, 1, 2])\nlen(s)\n", "2\n"},
		{"predeclared", "json.encode({'a': 1})\n", "\"{\\\"a\\\":1}\"\n"},
		{"error then recovery", "1 // 0\n2\n",
			"error: Traceback (most recent call last):\n  <stdin>:1:3: in <expr>\nError: floored division by zero\n2\n"},
		{"error in a function keeps its traceback", "def f():\n    fail('boom')\n\nf()\n'after'\n",
			"error: Traceback (most recent call last):\n  <stdin>:1:2: in <expr>\n  <stdin>:2:9: in f\nError: fail: boom\n\"after\"\n"},
		{"assignments before an error stay", "p = 1; q = 1 // 0\np\n",
			"error: Traceback (most recent call last):\n  <stdin>:1:14: in <toplevel>\nError: floored division by zero\n1\n"},
		{"syntax error then recovery", "x = (1,\n)\n)\n3\n", "error: <stdin>:1:1: unexpected ')'\n3\n"},
		{"unclosed bracket at end of input", "x = [1,\n", "error: <stdin>:2:1: unexpected end of input\n"},
		{"undefined name", "nope\n1\n", "error: <stdin>:1:1: undefined: nope\n1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newREPL(t, t.TempDir())
			if got := transcript(t, r, tt.src); got != tt.want {
				t.Errorf("input:\n%s\ngot:\n%s\nwant:\n%s", tt.src, got, tt.want)
			}
		})
	}
}

func TestREPLDefAtEndOfInputIsDefined(t *testing.T) {
	r, _ := newREPL(t, t.TempDir())
	transcript(t, r, "def g():\n    return 7")
	if _, ok := r.Globals()["g"]; !ok {
		t.Fatal("the def completed by the end of input was not executed")
	}
}

func TestREPLPrompts(t *testing.T) {
	r, _ := newREPL(t, t.TempDir())
	var prompts []bool
	next := lineSource("\ndef f():\n    return 1\n\nf()\n", &prompts)
	for {
		in, err := r.Read(next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Eval(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	// blank line and "def" at the primary prompt, the body and the blank
	// line as continuations, "f()" and the end at the primary prompt
	want := []bool{false, false, true, true, false, false}
	if !reflect.DeepEqual(prompts, want) {
		t.Fatalf("continued = %v, want %v", prompts, want)
	}
}

func TestREPLReadErrorDiscardsTheInput(t *testing.T) {
	r, _ := newREPL(t, t.TempDir())
	interrupt := errors.New("interrupt")
	calls := 0
	next := func(bool) (string, error) {
		calls++
		switch calls {
		case 1:
			return "def f():\n", nil
		case 2:
			return "", interrupt
		case 3:
			return "40 + 2\n", nil
		}
		return "", io.EOF
	}
	if _, err := r.Read(next); err != interrupt {
		t.Fatalf("Read = %v, want the line source's error", err)
	}
	in, err := r.Read(next)
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.Eval(context.Background(), in)
	if err != nil || v.String() != "42" {
		t.Fatalf("after the interrupt: %v, %v", v, err)
	}
	if _, err := r.Read(next); !errors.Is(err, io.EOF) {
		t.Fatalf("Read at the end = %v", err)
	}
}

func TestREPLCancelThenContinue(t *testing.T) {
	r, printed := newREPL(t, t.TempDir())
	next := lineSource("n = 0\nwhile True:\n    n += 1\n\nn > 0\n", nil)
	for i := 0; i < 3; i++ {
		in, err := r.Read(next)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if i == 1 {
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			time.AfterFunc(50*time.Millisecond, func() { cancel(errors.New("interrupted")) })
		}
		v, err := r.Eval(ctx, in)
		switch i {
		case 1:
			if err == nil || !strings.Contains(FormatError(err), "Starlark computation cancelled: interrupted") {
				t.Fatalf("cancelled input: %v", err)
			}
		case 2:
			if err != nil || v != starlark.True {
				t.Fatalf("input after the cancelled one: %v, %v", v, err)
			}
		}
	}
	if printed.Len() != 0 {
		t.Fatalf("printed %q", printed.String())
	}
}

func TestREPLStepLimitPerInput(t *testing.T) {
	st, err := New(Options{Root: t.TempDir(), MaxSteps: 5000, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	r := NewREPL(st)
	// each input may use most of the budget: the limit is per input
	got := transcript(t, r, "t = 0\nfor i in range(200):\n    t += i\n\nfor i in range(200):\n    t += i\n\nt\n")
	if got != "39800\n" {
		t.Fatalf("got %q", got)
	}
}

func TestREPLLoadRelativeToRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "lib.star"), []byte("greeting = 'hi'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, _ := newREPL(t, root)
	if got := transcript(t, r, "load('lib.star', 'greeting')\ngreeting\n"); got != "\"hi\"\n" {
		t.Fatalf("got %q", got)
	}
	if got := transcript(t, r, "load('../x.star', 'y')\n"); !strings.Contains(got, "escapes the script directory") {
		t.Fatalf("got %q", got)
	}
}

func TestREPLPrintGoesToStdout(t *testing.T) {
	r, printed := newREPL(t, t.TempDir())
	if got := transcript(t, r, "print('hello')\n"); got != "" {
		t.Fatalf("print returned %q", got)
	}
	if printed.String() != "hello\n" {
		t.Fatalf("printed %q", printed.String())
	}
}

func TestREPLComplete(t *testing.T) {
	r, _ := newREPL(t, t.TempDir())
	transcript(t, r, "counter = 1\ncount_all = 2\n_hidden = 3\nrec = struct(alpha = 1, beta = struct(gamma = 2))\n")
	tests := []struct {
		before  string
		words   []string
		partial int
	}{
		{"cou", []string{"count_all", "counter"}, 3},
		{"x = 1 + cou", []string{"count_all", "counter"}, 3},
		{"_hi", []string{"_hidden"}, 3},
		{"js", []string{"json"}, 2},
		{"json.", []string{"decode", "encode", "encode_indent", "indent"}, 0},
		{"json.en", []string{"encode", "encode_indent"}, 2},
		{"rec.beta.g", []string{"gamma"}, 1},
		{"rec.", []string{"alpha", "beta"}, 0},
		{"lambd", []string{"lambda"}, 5},
		{"le", []string{"len"}, 2},
		{"nope.", nil, 0},
		{"counter.", nil, 0},
		{"'abc'.up", nil, 0},
		{"12", nil, 0},
		{"", nil, 0},
	}
	for _, tt := range tests {
		words, partial := r.Complete(tt.before)
		if !reflect.DeepEqual(words, tt.words) || partial != tt.partial {
			t.Errorf("Complete(%q) = %q, %d; want %q, %d", tt.before, words, partial, tt.words, tt.partial)
		}
	}
	// strings, lists and dicts have methods
	transcript(t, r, "word = 'abc'\n")
	if words, _ := r.Complete("word.up"); !reflect.DeepEqual(words, []string{"upper"}) {
		t.Errorf("Complete(word.up) = %q", words)
	}
}

// TestREPLSource: each input's source is its lines as typed, without
// the blank line that ended it or a line read past it; a syntax error's
// lines are kept by LastSource.
func TestREPLSource(t *testing.T) {
	r, _ := newREPL(t, t.TempDir())
	next := lineSource("\n1 + 2\ndef f(n):\n    n += 1\n    return n * 2\n\n  :help \nif True:\n    x = 1\nx\nx = [1,\n  2 +]\n3\n", nil)
	var got []string
	for {
		in, err := r.Read(next)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			got = append(got, "error: "+r.LastSource())
			continue
		}
		if in.Source() != r.LastSource() {
			t.Fatalf("Source %q, LastSource %q", in.Source(), r.LastSource())
		}
		got = append(got, in.Source())
	}
	want := []string{"1 + 2", "def f(n):\n    n += 1\n    return n * 2", ":help", "if True:\n    x = 1", "x", "error: x = [1,\n  2 +]", "3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sources\n%q\nwant\n%q", got, want)
	}
	if _, err := r.Read(func(bool) (string, error) { return "", errors.New("interrupt") }); err == nil || r.LastSource() != "" {
		t.Fatalf("after an interrupt: %v, LastSource %q", err, r.LastSource())
	}
}
