package main

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// maxInitBytes bounds what any one package's initialisation may allocate
// in the skein binary: start-up is paid by every command, and package
// init is spent before main. (santhosh-tekuri/jsonschema, whose upstream
// init compiles its meta-schemas, allocated 1.7 MB; skein builds it from
// the copy in internal/third_party/jsonschema, which does that lazily.)
const maxInitBytes = 128 << 10

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
	for _, m := range found {
		pkg := string(m[1])
		bytes, _ := strconv.Atoi(string(m[2]))
		if bytes > maxInitBytes {
			t.Errorf("package %s allocates %d bytes (%s allocations) at init, more than %d", pkg, bytes, m[3], maxInitBytes)
		}
		sawSchema = sawSchema || pkg == "github.com/skein-dev/skein/internal/third_party/jsonschema"
	}
	if !sawSchema {
		t.Error("no init line for github.com/skein-dev/skein/internal/third_party/jsonschema")
	}
}
