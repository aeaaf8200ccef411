package serve

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/skein-dev/skein/internal/nodetest"
)

// TestOpenAPIClientCompiles generates TypeScript types from the
// document /openapi.json serves, with openapi-typescript, and compiles
// testdata/node/client.ts against them with tsc --strict: the document is
// valid for a real generator, its open objects take any keys, and the
// statuses the program uses are declared. The packages are pinned in
// testdata/node (npm ci).
func TestOpenAPIClientCompiles(t *testing.T) {
	node := nodetest.Require(t, "testdata/node")
	ts := newTestServer(t, Config{})
	r := ts.doAuth("GET", "/openapi.json", nil, "")
	ts.expect(r, http.StatusOK, "")
	dir := t.TempDir()
	spec := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(spec, r.body, 0o644); err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("testdata/node/client.ts")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.ts"), program, 0o644); err != nil {
		t.Fatal(err)
	}
	modules, err := filepath.Abs("testdata/node/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(node, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, out)
		}
	}
	run(filepath.Join(modules, "openapi-typescript", "bin", "cli.js"), spec, "--output", filepath.Join(dir, "api.d.ts"))
	run(filepath.Join(modules, "typescript", "bin", "tsc"), "--noEmit", "--strict", "--target", "es2022", "--module", "es2022",
		"--moduleResolution", "bundler", filepath.Join(dir, "client.ts"))
}
