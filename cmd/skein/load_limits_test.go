package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runSkeinFails runs skein with args, expects it to fail and returns
// its stdout and stderr.
func runSkeinFails(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := skein(args, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut}); code == exitOK {
		t.Fatalf("skein %v succeeded:\n%s", args, out.String())
	}
	return out.String(), errOut.String()
}

// TestLoadHardLinks: load() and a workflow's fn: stage read modules
// beneath the script directory, refusing symbolic links that lead out;
// a hard link to a file outside was read (issue 26). It is refused now,
// outside the full fs scope.
func TestLoadHardLinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(dir, "outside")
	proj := filepath.Join(dir, "proj")
	for _, d := range []string{outside, proj} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(outside, "secret.star"): "leaked = 'SECRET'\ndef file(ctx):\n    return 'SECRET'\n",
		filepath.Join(proj, "main.star"):      "load('lib.star', 'leaked')\nprint(leaked)\n",
		filepath.Join(proj, "flow.yaml"):      "name: f\nentry: file\nnodes:\n  file:\n    mode: fn\n    fn: lib.star:file\n",
	}
	for p, content := range files {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(outside, "secret.star"), filepath.Join(proj, "lib.star")); err != nil {
		t.Skipf("cannot make a hard link here: %v", err)
	}
	out, errOut := runSkeinFails(t, "run", "--store", "memory", filepath.Join(proj, "main.star"))
	if strings.Contains(out, "SECRET") || !strings.Contains(errOut, `cannot load lib.star: "lib.star" has 2 hard links: a module with more than one link may be a file outside the script directory`) {
		t.Errorf("load of a hard link: stdout %q, stderr %q", out, errOut)
	}
	out, errOut = runSkeinFails(t, "run", "--store", "memory", "--provider", "mock", filepath.Join(proj, "flow.yaml"), "--task", "x")
	if strings.Contains(out, "SECRET") || !strings.Contains(errOut, `node 'file': fn: "lib.star" has 2 hard links`) {
		t.Errorf("fn stage of a hard link: stdout %q, stderr %q", out, errOut)
	}
	// The full fs scope reaches every file anyway.
	if out := runSkein(t, "run", "--store", "memory", "--fs-scope", "full", filepath.Join(proj, "main.star")); out != "SECRET\n" {
		t.Errorf("--fs-scope full: %q", out)
	}
}

// TestReadLimits: fs.read, fs.read_jsonl, fs.read_csv and load() read a
// file whole; a 150 MB one peaked at 1.6 GB. Files over --max-read-bytes
// (64 MiB by default) are refused with an error naming the builtin, the
// size and the limit.
func TestReadLimits(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.txt")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// sparse: 65 MiB without writing them
	if err := f.Truncate(65 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for name, script := range map[string]string{
		"fs.read":       "fs.read('big.txt')",
		"fs.read_jsonl": "fs.read_jsonl('big.txt')",
		"fs.read_csv":   "fs.read_csv('big.txt')",
	} {
		p := filepath.Join(dir, "s.star")
		if err := os.WriteFile(p, []byte(script+"\nprint('read')\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut := runSkeinFails(t, "run", "--store", "memory", p)
		want := name + `: "big.txt" is 65 MiB, more than the 64 MiB a file read whole may have (--max-read-bytes raises the limit)`
		if out != "" || !strings.Contains(errOut, want) {
			t.Errorf("%s: stdout %q, stderr %q, want %q", name, out, errOut, want)
		}
	}
	// A smaller limit applies to load() too, and a larger one lets the read through.
	mod := filepath.Join(dir, "mod.star")
	if err := os.WriteFile(mod, []byte("x = '"+strings.Repeat("a", 2000)+"'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "main.star")
	if err := os.WriteFile(main, []byte("load('mod.star', 'x')\nprint(len(x))\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut := runSkeinFails(t, "run", "--store", "memory", "--max-read-bytes", "1024", main)
	if want := `cannot load mod.star: "mod.star" is 2.0 KiB, more than the 1 KiB a file read whole may have (--max-read-bytes raises the limit)`; !strings.Contains(errOut, want) {
		t.Errorf("load over the limit: %q, want %q", errOut, want)
	}
	if out := runSkein(t, "run", "--store", "memory", main); out != "2000\n" {
		t.Errorf("load under the limit: %q", out)
	}
	p := filepath.Join(dir, "s.star")
	os.WriteFile(p, []byte("print(len(fs.read('big.txt')))\n"), 0o644)
	if out := runSkein(t, "run", "--store", "memory", "--max-read-bytes", "70000000", p); out != "68157440\n" {
		t.Errorf("--max-read-bytes 70000000: %q", out)
	}
}
