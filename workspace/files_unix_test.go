//go:build unix

package workspace

import (
	"context"
	"errors"
	"os"
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

// A hard link inside the workspace to a file outside it would let fs.read
// return that file and fs.write rewrite it in place: in the sandboxed and
// project tiers a regular file with more than one link is refused, before
// anything is truncated, and Search skips it. The full tier allows it.
func TestHardLinkRefused(t *testing.T) {
	base := tempDir(t)
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "secret.txt")
	writeFile(t, outside, "outside secret\n")
	writeFile(t, filepath.Join(root, "a.txt"), "needle\n")
	if err := os.Link(outside, filepath.Join(root, "link.txt")); err != nil {
		t.Skipf("link: %v", err)
	}
	for _, tier := range []Tier{Sandboxed, Project} {
		p := mustNew(t, Config{Root: root, Tier: tier})
		want := `"link.txt" has 2 hard links: a file with more than one link may be outside the workspace (fs scope ` + tier.String()
		if data, err := p.ReadFile("link.txt"); err == nil || !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: ReadFile(link) = %q, %v", tier, data, err)
		}
		for name, write := range map[string]func(string, []byte) error{"WriteFile": p.WriteFile, "AppendFile": p.AppendFile} {
			if err := write("link.txt", []byte("overwritten\n")); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %s(link) = %v", tier, name, err)
			}
		}
		if got, _ := os.ReadFile(outside); string(got) != "outside secret\n" {
			t.Fatalf("%s: the outside file was changed: %q", tier, got)
		}
		res, err := p.Search(context.Background(), "secret|needle", ".", "", 0)
		if err != nil || len(res.Matches) != 1 || res.Matches[0].File != "a.txt" {
			t.Errorf("%s: Search = %+v, %v", tier, res, err)
		}
	}
	full := mustNew(t, Config{Root: root, Tier: Full})
	if data, err := full.ReadFile("link.txt"); err != nil || string(data) != "outside secret\n" {
		t.Errorf("full: ReadFile(link) = %q, %v", data, err)
	}
}
