package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/skein-dev/skein/mcp/mcptest"
)

// TestMCPDocsExample runs the worked example of docs/mcp.md against the
// real filesystem server (installed locally instead of through npx) and
// checks that it prints what the page says.
func TestMCPDocsExample(t *testing.T) {
	n := mcptest.Find(t)
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```python\n(# fs_agent.star: (skein run [^\n]*)\n.*?)```\n.*?```\n\\$ ([^\n]*)\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/mcp.md: the worked example (fs_agent.star, its command and its output) was not found")
	}
	src, header, shown, want := string(m[1]), string(m[2]), string(m[3]), string(m[4])
	if header != shown {
		t.Errorf("the example's header runs %q, the page shows %q", header, shown)
	}
	npx := `["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]`
	if !strings.Contains(src, npx) {
		t.Fatalf("the example does not start the server with %s", npx)
	}
	local := `["node", "` + n.Filesystem()[1] + `", "."]`
	src = strings.Replace(src, npx, local, 1)
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.WriteFile("notes.txt", []byte("remember the milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("fs_agent.star", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := shellWords(t, strings.Replace(header, "--allow-cmd npx", "--allow-cmd node --store memory", 1))[1:]
	var out, errOut bytes.Buffer
	if code := skein(args, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut}); code != exitOK {
		t.Fatalf("skein %s exited %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	if out.String() != want {
		t.Errorf("the example printed:\n%s\ndocs/mcp.md shows:\n%s", out.String(), want)
	}
}
