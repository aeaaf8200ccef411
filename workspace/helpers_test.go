package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempDir returns a fresh temporary directory with its symbolic links
// resolved (on some systems the temporary directory is behind one).
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeFile creates path (and its parents) with content.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("cannot create symbolic links here: %v", err)
	}
}

func mustNew(t *testing.T, c Config) *Policy {
	t.Helper()
	p, err := New(c)
	if err != nil {
		t.Fatalf("New(%+v): %v", c, err)
	}
	return p
}

// wantRefusal fails unless err is a policy refusal whose message contains
// every one of parts.
func wantRefusal(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want a refusal containing %q", parts)
	}
	if !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("got error %q, want a refusal (ErrNotAllowed)", err)
	}
	for _, part := range parts {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("refusal %q does not contain %q", err, part)
		}
	}
}

// tree is the layout the path tests share:
//
//	base/
//	  outside/secret.txt
//	  repo/.git/
//	  repo/top.txt
//	  repo/ws/                       the workspace root
//	  repo/ws/in.txt
//	  repo/ws/sub/deep.txt
//	  repo/ws/link_in      -> sub/deep.txt
//	  repo/ws/link_in_abs  -> base/repo/ws/in.txt
//	  repo/ws/link_top     -> ../top.txt
//	  repo/ws/link_out     -> base/outside/secret.txt
//	  repo/ws/dirlink_in   -> sub
//	  repo/ws/dirlink_out  -> base/outside
type tree struct {
	base, outside, repo, ws string
}

func newTree(t *testing.T) tree {
	t.Helper()
	base := tempDir(t)
	tr := tree{
		base:    base,
		outside: filepath.Join(base, "outside"),
		repo:    filepath.Join(base, "repo"),
		ws:      filepath.Join(base, "repo", "ws"),
	}
	writeFile(t, filepath.Join(tr.outside, "secret.txt"), "secret")
	if err := os.MkdirAll(filepath.Join(tr.repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(tr.repo, "top.txt"), "top")
	writeFile(t, filepath.Join(tr.ws, "in.txt"), "in")
	writeFile(t, filepath.Join(tr.ws, "sub", "deep.txt"), "deep")
	symlink(t, "sub/deep.txt", filepath.Join(tr.ws, "link_in"))
	symlink(t, filepath.Join(tr.ws, "in.txt"), filepath.Join(tr.ws, "link_in_abs"))
	symlink(t, "../top.txt", filepath.Join(tr.ws, "link_top"))
	symlink(t, filepath.Join(tr.outside, "secret.txt"), filepath.Join(tr.ws, "link_out"))
	symlink(t, "sub", filepath.Join(tr.ws, "dirlink_in"))
	symlink(t, tr.outside, filepath.Join(tr.ws, "dirlink_out"))
	return tr
}

// expand replaces $BASE in s with the tree's base directory.
func (tr tree) expand(s string) string { return strings.ReplaceAll(s, "$BASE", tr.base) }
