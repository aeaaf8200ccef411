package main

import (
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// maxInitBytes bounds what any one package's initialisation may allocate
// in the skein binary: start-up is paid by every command, and package
// init is spent before main. (santhosh-tekuri/jsonschema, whose upstream
// init compiles its meta-schemas, allocated 1.7 MB; skein builds it from
// the copy in internal/third_party/jsonschema, which does that lazily.)
const maxInitBytes = 128 << 10

// maxOwnInitBytes bounds it for skein's own packages, which build what
// they can on first use (sync.OnceValue, or a switch instead of a map
// literal) instead: builtins' option tables allocated 61 KB at every
// start until they did, and the jsonschema copy's draft tables, regular
// expressions and lookup maps 27 KB in all until November 2026 (the
// largest is now under 1 KB). This package is bounded by maxTestInitBytes
// instead: in this test binary its initialisation includes its test
// files' variables, which the skein binary does not have.
const maxOwnInitBytes = 4 << 10

// maxTestInitBytes bounds this package's initialisation in the test
// binary (its own variables and its test files').
const maxTestInitBytes = 32 << 10

// maxInitTotalBytes bounds what the initialisation of all packages
// allocates in this test binary (the skein binary's packages and the
// testing ones; about 250 KB in November 2026, 540 KB while
// github.com/prometheus/client_golang and protobuf were linked). The MCP
// SDK (github.com/modelcontextprotocol/go-sdk, the chosen dependency for
// mcp_server) added about 125 KB: google/jsonschema-go 81 KB, encoding/gob
// 28 KB and the SDK's own packages 16 KB, about 0.5 ms of start-up, in
// package init that skein cannot defer (the skein binary's total went
// from 182 KB to 306 KB).
const maxInitTotalBytes = 400 << 10

// TestPackageInitAllocations runs this test binary, which initialises the
// same packages as skein (and the testing ones), with
// GODEBUG=inittrace=1 and checks each package's allocations.
func TestPackageInitAllocations(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	line := regexp.MustCompile(`(?m)^init (\S+) @.*?, (\d+) bytes, (\d+) allocs$`)
	found := line.FindAllSubmatch(out, -1)
	if len(found) < 10 {
		t.Fatalf("found %d init lines in:\n%s", len(found), out)
	}
	sawSchema := false
	total := 0
	for _, m := range found {
		pkg := string(m[1])
		bytes, _ := strconv.Atoi(string(m[2]))
		total += bytes
		if bytes > maxInitBytes {
			t.Errorf("package %s allocates %d bytes (%s allocations) at init, more than %d", pkg, bytes, m[3], maxInitBytes)
		}
		if own := strings.HasPrefix(pkg, "github.com/skein-dev/skein/"); own && pkg != "github.com/skein-dev/skein/cmd/skein" && bytes > maxOwnInitBytes {
			t.Errorf("package %s allocates %d bytes (%s allocations) at init, more than %d: build it on first use", pkg, bytes, m[3], maxOwnInitBytes)
		} else if own && bytes > maxTestInitBytes {
			t.Errorf("package %s allocates %d bytes (%s allocations) at init, more than %d: build it on first use", pkg, bytes, m[3], maxTestInitBytes)
		}
		sawSchema = sawSchema || pkg == "github.com/skein-dev/skein/internal/third_party/jsonschema"
	}
	if !sawSchema {
		t.Error("no init line for github.com/skein-dev/skein/internal/third_party/jsonschema")
	}
	if total > maxInitTotalBytes {
		t.Errorf("package initialisation allocates %d bytes in all, more than %d", total, maxInitTotalBytes)
	}
}

// TestNoMetricsLibraryLinked: github.com/prometheus/client_golang, its
// procfs and protobuf did their set-up in package initialisation, which
// every command paid (about a quarter of `skein run`'s start-up); `skein
// serve` writes /metrics itself, and none of them may come back into
// the binary. (This test binary links what the skein binary links, and
// the tests' own imports.)
func TestNoMetricsLibraryLinked(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	sawStarlark := false
	for _, dep := range info.Deps {
		sawStarlark = sawStarlark || dep.Path == "go.starlark.net"
		if strings.HasPrefix(dep.Path, "github.com/prometheus/") || dep.Path == "google.golang.org/protobuf" {
			t.Errorf("the binary links %s", dep.Path)
		}
	}
	if !sawStarlark {
		t.Errorf("go.starlark.net is not among the dependencies: %v", info.Deps)
	}
}
