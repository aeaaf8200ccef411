// Package nodetest finds what the tests that drive skein with Node.js
// programs need: the node command and a testdata directory whose
// package.json dependencies are installed (npm ci). Without them such a
// test skips, naming what to install; with SKEIN_REQUIRE_NODE=1 (set by
// .ci/run) it fails instead.
package nodetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RequireEnv is the environment variable that turns a missing node or
// missing packages into a test failure.
const RequireEnv = "SKEIN_REQUIRE_NODE"

// Require returns the path of the node command, once it has checked that
// dir (a directory with a package.json and its package-lock.json) has
// its packages installed. Otherwise it skips the test, or fails it when
// RequireEnv is set to 1.
func Require(t testing.TB, dir string) string {
	t.Helper()
	missing := func(what string) {
		t.Helper()
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s (%s=1 makes this a failure)", what, RequireEnv)
		}
		t.Skip(what)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node is not installed: install Node.js 20 or newer to run this test")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err != nil {
		abs, _ := filepath.Abs(dir)
		missing("the test's npm packages are not installed: run `npm ci` in " + abs)
	}
	return node
}
