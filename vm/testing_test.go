package vm

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testRunner(t *testing.T) *TestRunner {
	t.Helper()
	builtins, err := TestBuiltins()
	if err != nil {
		t.Fatal(err)
	}
	return &TestRunner{NewState: func(stdout io.Writer) (*State, error) {
		return New(Options{Builtins: builtins, Stdout: stdout, Root: t.TempDir()})
	}}
}

const runnerSrc = `
def helper():
    return 2

def test_pass():
    print("hello")
    assert.eq(helper(), 2)

def test_two_failures():
    assert.eq(1 + 1, 3)
    assert.true(False, "second")
    assert.eq(1, 1)

def test_error():
    fail("boom")

def test_skip():
    skip("later")
    assert.eq(1, 2)

def test_nothing():
    pass

def test_nested():
    assert.fails(lambda: assert.eq(1, 2), "never")

def not_a_test():
    pass
`

func TestRunnerDiscoverInDefinitionOrder(t *testing.T) {
	names, err := testRunner(t).Discover("x_test.star", []byte(runnerSrc))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"test_pass", "test_two_failures", "test_error", "test_skip", "test_nothing", "test_nested"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %v, want %v", names, want)
	}
}

func TestRunnerResults(t *testing.T) {
	r := testRunner(t)
	run := func(name string) TestResult { return r.Run("x_test.star", []byte(runnerSrc), name) }

	if res := run("test_pass"); res.Status != TestPass || res.Assertions != 1 || res.Output != "hello\n" || res.Duration <= 0 {
		t.Errorf("test_pass = %+v", res)
	}

	res := run("test_two_failures")
	if res.Status != TestFail || res.Assertions != 3 || len(res.Failures) != 2 {
		t.Fatalf("test_two_failures = %+v", res)
	}
	got := []string{res.Failures[0].String(), res.Failures[1].String()}
	want := []string{"x_test.star:10:14: assert.eq: 2 != 3", "x_test.star:11:16: assert.true: second"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("failures = %q, want %q", got, want)
	}
	if tb := res.Failures[0].Traceback; !strings.HasPrefix(tb, "Traceback (most recent call last):\n  x_test.star:10:14: in test_two_failures\n") || !strings.HasSuffix(tb, "Error: 2 != 3") {
		t.Errorf("traceback = %q", tb)
	}

	if res := run("test_error"); res.Status != TestError || !strings.Contains(res.Error, "Error: fail: boom") || !strings.Contains(res.Error, "x_test.star:15:9: in test_error") {
		t.Errorf("test_error = %+v", res)
	}
	if res := run("test_skip"); res.Status != TestSkip || res.SkipReason != "later" || len(res.Failures) != 0 {
		t.Errorf("test_skip = %+v", res)
	}
	if res := run("test_nothing"); res.Status != TestPass || res.Assertions != 0 {
		t.Errorf("test_nothing = %+v", res)
	}
	// an assertion failing inside another is attributed to the inner one
	res = run("test_nested")
	if res.Status != TestFail || len(res.Failures) != 2 {
		t.Fatalf("test_nested = %+v", res)
	}
	if got := res.Failures[0].String(); got != "x_test.star:25:35: assert.eq: 1 != 2" {
		t.Errorf("inner failure = %q", got)
	}
	if got := res.Failures[1].String(); !strings.HasPrefix(got, "x_test.star:25:17: assert.fails: evaluation succeeded unexpectedly") {
		t.Errorf("outer failure = %q", got)
	}
	if res := run("nope"); res.Status != TestError || res.Error != "no test function nope in x_test.star" {
		t.Errorf("missing test = %+v", res)
	}
}

func TestRunnerTimeout(t *testing.T) {
	r := testRunner(t)
	r.Timeout = 50 * time.Millisecond
	res := r.Run("slow_test.star", []byte("def test_forever():\n    while True:\n        pass\n"), "test_forever")
	if res.Status != TestError || !strings.Contains(res.Error, "timeout: the test exceeded 50ms") {
		t.Fatalf("res = %+v", res)
	}
}

func TestRunnerSharesTheProgramAcrossConcurrentTests(t *testing.T) {
	r := testRunner(t)
	src := []byte("counter = [0]\n\ndef test_fresh_globals():\n    counter[0] += 1\n    assert.eq(counter[0], 1)\n")
	if _, err := r.Discover("c_test.star", src); err != nil {
		t.Fatal(err)
	}
	results := make(chan TestResult, 16)
	for range 16 {
		go func() { results <- r.Run("c_test.star", src, "test_fresh_globals") }()
	}
	for range 16 {
		// every test gets the file's top level run afresh in its own VM
		if res := <-results; res.Status != TestPass {
			t.Fatalf("res = %+v", res)
		}
	}
	// a changed source is compiled again
	changed := []byte("def test_other():\n    assert.true(True)\n")
	if names, err := r.Discover("c_test.star", changed); err != nil || len(names) != 1 || names[0] != "test_other" {
		t.Fatalf("after a change: %v, %v", names, err)
	}
}
