package builtins_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/vm"
)

// sessionCaps gives test files that need a small LRU their cap.
var sessionCaps = map[string]int{"eviction_test.star": 3}

// TestStarlark runs every testdata/*_test.star file's test_* functions,
// each in a fresh test VM, through vm.TestRunner (the runner `skein test`
// uses).
func TestStarlark(t *testing.T) {
	files, err := filepath.Glob("testdata/*_test.star")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*_test.star files")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), "_test.star"), func(t *testing.T) {
			runStarlarkFile(t, file)
		})
	}
}

func runStarlarkFile(t *testing.T, file string) {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	capacity := sessionCaps[filepath.Base(file)]
	if capacity == 0 {
		capacity = sessions.DefaultCap
	}
	setup := workspaceSetup(t, file)
	var printed bytes.Buffer // what the current test printed, for the secret check
	runner := &vm.TestRunner{NewState: func(stdout io.Writer) (*vm.State, error) {
		ids := builtins.TestIDs(1)
		store, err := sessions.NewStore(sessions.NewMemoryBackend(), sessions.WithCap(capacity), sessions.WithClock(builtins.TestClock), sessions.WithIDs(ids))
		if err != nil {
			return nil, err
		}
		printed.Reset()
		opts := vm.Options{Store: store, NewID: ids, Stdout: io.MultiWriter(stdout, &printed), Root: filepath.Dir(file)}
		if setup != nil {
			if err := setup(&opts); err != nil {
				return nil, err
			}
		}
		return builtins.NewTestState(opts, 1)
	}}
	names, err := runner.Discover(file, src)
	if err != nil {
		t.Fatalf("%s: %s", file, vm.FormatError(err))
	}
	if len(names) == 0 {
		t.Fatalf("%s has no test_* functions", file)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			res := runner.Run(file, src, name)
			if res.Output != "" {
				t.Log(res.Output)
			}
			switch res.Status {
			case vm.TestError:
				t.Error(res.Error)
			case vm.TestFail:
				for _, f := range res.Failures {
					t.Error(f)
				}
			case vm.TestSkip:
				t.Skip(res.SkipReason)
			}
			if res.Assertions == 0 && res.Status == vm.TestPass {
				t.Errorf("%s asserts nothing", name)
			}
			if text := printed.String() + res.Output + res.Error + fmt.Sprint(res.Failures); strings.Contains(text, testSecret) {
				t.Errorf("%s leaked the value of a secret into its output or errors", name)
			}
		})
	}
}
