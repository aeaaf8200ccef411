package vm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.starlark.net/starlark"
)

func newTestState(t *testing.T, root string) *State {
	t.Helper()
	st, err := New(Options{Root: root, Stdout: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestStateOf(t *testing.T) {
	if _, err := StateOf(&starlark.Thread{}); err == nil || !strings.Contains(err.Error(), "no skein VM state") {
		t.Fatalf("StateOf(foreign thread) = %v", err)
	}
	st := newTestState(t, t.TempDir())
	got, err := StateOf(st.NewThread("x"))
	if err != nil || got != st {
		t.Fatalf("StateOf = %v, %v", got, err)
	}
}

func TestConversionRoundTrip(t *testing.T) {
	in := map[string]any{
		"s": "x", "i": int64(-3), "f": 2.5, "b": true, "n": nil,
		"l": []any{int64(1), "two", []any{}}, "m": map[string]any{"k": map[string]any{}},
	}
	v := ToStarlark(in)
	out, err := FromStarlark(v, "x")
	if err != nil {
		t.Fatal(err)
	}
	if ToStarlark(out).String() != v.String() {
		t.Fatalf("round trip: %s != %s", ToStarlark(out), v)
	}
	if v.String() != `{"b": True, "f": 2.5, "i": -3, "l": [1, "two", []], "m": {"k": {}}, "n": None, "s": "x"}` {
		t.Fatalf("keys not sorted or values wrong: %s", v)
	}
}

func TestFromStarlarkErrors(t *testing.T) {
	d := starlark.NewDict(1)
	_ = d.SetKey(starlark.String("a"), starlark.NewList([]starlark.Value{starlark.MakeInt(1), starlark.NewBuiltin("f", nil)}))
	if _, err := FromStarlark(d, "metadata"); err == nil || err.Error() != "metadata.a[1]: got builtin_function_or_method, want a JSON-encodable value (None, bool, int, float, string, list, dict)" {
		t.Fatalf("err = %v", err)
	}
	big := starlark.MakeInt(1).Lsh(70)
	if _, err := FromStarlark(big, "n"); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("err = %v", err)
	}
}

func TestBeginCancelsEveryThread(t *testing.T) {
	st := newTestState(t, t.TempDir())
	ctx, cancel := context.WithCancelCause(context.Background())
	end := st.Begin(ctx)
	defer end()
	before := st.NewThread("before")
	cancel(errors.New("stop now"))
	after := st.NewThread("after")
	for _, th := range []*starlark.Thread{before, after} {
		_, err := starlark.ExecFileOptions(Dialect(), th, "loop.star", "while True:\n    pass\n", nil)
		if err == nil || !strings.Contains(err.Error(), "cancelled: stop now") {
			t.Fatalf("%s: err = %v", th.Name, err)
		}
	}
	if !errors.Is(st.Context().Err(), context.Canceled) {
		t.Fatal("Context is not the run's context")
	}
}

func TestBeginCancelsRunningLoop(t *testing.T) {
	st := newTestState(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	end := st.Begin(ctx)
	defer end()
	start := time.Now()
	_, err := st.ExecFile("loop.star", "while True:\n    pass\n")
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("loop not cancelled: %v", err)
	}
}

func TestConcurrentLoadsShareOneExecution(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "lib.star"), []byte("print('executing lib')\nx = [1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var mu sync.Mutex
	st, err := New(Options{Root: dir, Stdout: writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]starlark.Value, 8)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			th := st.NewThread("w")
			SetFile(th, filepath.Join(dir, "main.star"))
			g, err := th.Load(th, "lib.star")
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = g["x"]
		}(i)
	}
	wg.Wait()
	if n := strings.Count(out.String(), "executing lib"); n != 1 {
		t.Fatalf("lib executed %d times", n)
	}
	for _, r := range results[1:] {
		if r != results[0] {
			t.Fatal("loads returned different module values")
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestSeededIDsAreDeterministicUUIDv7(t *testing.T) {
	clock := FixedClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	a, b := SeededIDs(1, clock), SeededIDs(1, clock)
	for i := 0; i < 3; i++ {
		x, y := a(), b()
		if x != y {
			t.Fatalf("seeded ids differ: %s %s", x, y)
		}
		if len(x) != 36 || x[14] != '7' {
			t.Fatalf("not a UUIDv7: %s", x)
		}
	}
	if a() == a() {
		t.Fatal("ids repeat")
	}
}
