package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

// TestAddingAFlag: a flag is one row of a table; the row gives the help
// line, the default, and the environment variable that replaces it.
func TestAddingAFlag(t *testing.T) {
	var v struct {
		n    int
		s    string
		d    time.Duration
		list listFlag
	}
	t.Setenv("SKEIN_TEST_N", "7")
	t.Setenv("SKEIN_TEST_D", "3")
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	err := registerFlags(fs, []flagDef{
		{name: "n", value: &v.n, def: "5", env: "SKEIN_TEST_N", usage: "a number"},
		{name: "s", value: &v.s, def: "hello", usage: "a string"},
		{name: "d", value: &v.d, def: "1m0s", env: "SKEIN_TEST_D", envUnit: time.Minute, usage: "a duration"},
		{name: "list", value: &v.list, usage: "a list"},
		{name: "cores", value: new(int), def: "3", defDoc: "the number of cores", usage: "a machine's default"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v.n != 7 || v.s != "hello" || v.d != 3*time.Minute {
		t.Errorf("defaults: n=%d s=%q d=%s, want 7 (from the environment), hello, 3m0s (3 minutes from the environment)", v.n, v.s, v.d)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, want := range []string{"a number; env SKEIN_TEST_N (default 7)", "a string (default \"hello\")", "a duration; env SKEIN_TEST_D in minutes (default 3m0s)", "a list",
		"a machine's default (default the number of cores)"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("the help has no %q:\n%s", want, help.String())
		}
	}
	if err := fs.Parse([]string{"-n", "9", "-list", "a,b"}); err != nil || v.n != 9 || len(v.list) != 2 {
		t.Errorf("parse: %v, n=%d list=%v", err, v.n, v.list)
	}

	t.Setenv("SKEIN_TEST_N", "many")
	fs = flag.NewFlagSet("y", flag.ContinueOnError)
	err = registerFlags(fs, []flagDef{{name: "n", value: &v.n, def: "5", env: "SKEIN_TEST_N", usage: "a number"}})
	if err == nil || err.Error() != `environment variable SKEIN_TEST_N="many" is not a valid --n value` || v.n != 5 {
		t.Errorf("a bad environment value: %v, n=%d (want the error and the default 5)", err, v.n)
	}

	// A whole number of minutes past what a duration holds wraps around
	// (307445735 minutes would be 26 seconds): refused like any bad value.
	for _, bad := range []string{"307445735", "153722868", "-3"} {
		t.Setenv("SKEIN_TEST_D", bad)
		fs = flag.NewFlagSet("z", flag.ContinueOnError)
		err = registerFlags(fs, []flagDef{{name: "d", value: &v.d, def: "1m0s", env: "SKEIN_TEST_D", envUnit: time.Minute, usage: "a duration"}})
		if err == nil || v.d != time.Minute {
			t.Errorf("SKEIN_TEST_D=%s: %v, d=%s (want the error and the default 1m0s)", bad, err, v.d)
		}
	}
}
