//go:build unix

package workspace

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A FIFO would block a read forever; it is refused before it is opened
// and skipped by Search.
func TestFIFORefused(t *testing.T) {
	root := tempDir(t)
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	writeFile(t, filepath.Join(root, "a.txt"), "needle\n")
	p := mustNew(t, Config{Root: root})
	if _, err := p.ReadFile("fifo"); err == nil || !strings.Contains(err.Error(), `"fifo" is not a regular file`) {
		t.Errorf("ReadFile(fifo) = %v", err)
	}
	if err := p.WriteFile("fifo", []byte("x")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("WriteFile(fifo) = %v", err)
	}
	res, err := p.Search(context.Background(), "needle", ".", "", 0)
	if err != nil || len(res.Matches) != 1 {
		t.Errorf("Search = %+v, %v", res, err)
	}
}
