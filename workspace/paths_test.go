package workspace

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var tiers = []Tier{Sandboxed, Project, Full}

// outcome per tier: "ok" or "refused".
type outcomes [3]string

const ok, no = "ok", "refused"

func TestReadScope(t *testing.T) {
	tests := []struct {
		path string
		want string // content when allowed
		by   outcomes
	}{
		{"in.txt", "in", outcomes{ok, ok, ok}},
		{"./sub/deep.txt", "deep", outcomes{ok, ok, ok}},
		{"sub/../in.txt", "in", outcomes{ok, ok, ok}},
		{"sub//deep.txt", "deep", outcomes{ok, ok, ok}},
		{"../top.txt", "top", outcomes{no, ok, ok}},
		{"../../outside/secret.txt", "secret", outcomes{no, no, ok}},
		{"sub/../../../outside/secret.txt", "secret", outcomes{no, no, ok}},
		{"$BASE/repo/ws/in.txt", "in", outcomes{ok, ok, ok}},
		{"$BASE/repo/ws/../top.txt", "top", outcomes{no, ok, ok}},
		{"$BASE/repo/top.txt", "top", outcomes{no, ok, ok}},
		{"$BASE/outside/secret.txt", "secret", outcomes{no, no, ok}},
		{"link_in", "deep", outcomes{ok, ok, ok}},
		{"link_in_abs", "in", outcomes{ok, ok, ok}},
		{"link_top", "top", outcomes{no, ok, ok}},
		{"link_out", "secret", outcomes{no, no, ok}},
		{"dirlink_in/deep.txt", "deep", outcomes{ok, ok, ok}},
		{"dirlink_out/secret.txt", "secret", outcomes{no, no, ok}},
		{"$BASE/repo/ws/dirlink_out/secret.txt", "secret", outcomes{no, no, ok}},
	}
	for i, tier := range tiers {
		for _, tt := range tests {
			t.Run(tier.String()+"/"+tt.path, func(t *testing.T) {
				tr := newTree(t)
				p := mustNew(t, Config{Root: tr.ws, Tier: tier})
				path := tr.expand(tt.path)
				data, err := p.ReadFile(path)
				if tt.by[i] == no {
					wantRefusal(t, err, "path "+quote(path), "fs scope "+tier.String())
					_, err = p.ResolveRead(path)
					wantRefusal(t, err)
					_, err = p.Exists(path)
					wantRefusal(t, err)
					return
				}
				if err != nil {
					t.Fatalf("ReadFile(%q): %v", path, err)
				}
				if string(data) != tt.want {
					t.Errorf("ReadFile(%q) = %q, want %q", path, data, tt.want)
				}
				if ok, err := p.Exists(path); !ok || err != nil {
					t.Errorf("Exists(%q) = %v, %v, want true", path, ok, err)
				}
			})
		}
	}
}

func TestWriteScope(t *testing.T) {
	tests := []struct {
		path string
		real string // where the data lands, relative to base
		by   outcomes
	}{
		{"new.txt", "repo/ws/new.txt", outcomes{ok, ok, ok}},
		{"in.txt", "repo/ws/in.txt", outcomes{ok, ok, ok}},
		{"sub/a/b/new.txt", "repo/ws/sub/a/b/new.txt", outcomes{ok, ok, ok}},
		{"$BASE/repo/ws/abs.txt", "repo/ws/abs.txt", outcomes{ok, ok, ok}},
		{"../top.txt", "repo/top.txt", outcomes{no, no, ok}},
		{"../new.txt", "repo/new.txt", outcomes{no, no, ok}},
		{"$BASE/outside/new.txt", "outside/new.txt", outcomes{no, no, ok}},
		{"link_in", "repo/ws/sub/deep.txt", outcomes{ok, ok, ok}},
		{"link_top", "repo/top.txt", outcomes{no, no, ok}},
		{"link_out", "outside/secret.txt", outcomes{no, no, ok}},
		{"dirlink_in/new.txt", "repo/ws/sub/new.txt", outcomes{ok, ok, ok}},
		// A symbolic link as the parent of a file that does not exist yet.
		{"dirlink_out/new.txt", "outside/new.txt", outcomes{no, no, ok}},
		{"dirlink_out/a/b/new.txt", "outside/a/b/new.txt", outcomes{no, no, ok}},
	}
	for i, tier := range tiers {
		for _, tt := range tests {
			t.Run(tier.String()+"/"+tt.path, func(t *testing.T) {
				tr := newTree(t)
				p := mustNew(t, Config{Root: tr.ws, Tier: tier})
				path := tr.expand(tt.path)
				real := filepath.Join(tr.base, tt.real)
				before, _ := os.ReadFile(real)
				err := p.WriteFile(path, []byte("written"))
				if tt.by[i] == no {
					wantRefusal(t, err, "path "+quote(path), "fs scope "+tier.String())
					wantRefusal(t, p.AppendFile(path, []byte("x")))
					_, err = p.ResolveWrite(path)
					wantRefusal(t, err)
					if after, _ := os.ReadFile(real); string(after) != string(before) {
						t.Errorf("%s changed to %q by a refused write", real, after)
					}
					return
				}
				if err != nil {
					t.Fatalf("WriteFile(%q): %v", path, err)
				}
				if err := p.AppendFile(path, []byte("+")); err != nil {
					t.Fatalf("AppendFile(%q): %v", path, err)
				}
				if got, _ := os.ReadFile(real); string(got) != "written+" {
					t.Errorf("%s = %q, want %q", real, got, "written+")
				}
				if got, _ := p.ResolveWrite(path); got != real {
					t.Errorf("ResolveWrite(%q) = %q, want %q", path, got, real)
				}
			})
		}
	}
}

func TestListScope(t *testing.T) {
	tests := []struct {
		dir  string
		want string // a name the listing must hold
		by   outcomes
	}{
		{".", "in.txt", outcomes{ok, ok, ok}},
		{"sub", "deep.txt", outcomes{ok, ok, ok}},
		{"sub/..", "in.txt", outcomes{ok, ok, ok}},
		{"..", "top.txt", outcomes{no, ok, ok}},
		{"../..", "outside", outcomes{no, no, ok}},
		{"$BASE/outside", "secret.txt", outcomes{no, no, ok}},
		{"dirlink_in", "deep.txt", outcomes{ok, ok, ok}},
		{"dirlink_out", "secret.txt", outcomes{no, no, ok}},
	}
	for i, tier := range tiers {
		for _, tt := range tests {
			t.Run(tier.String()+"/"+tt.dir, func(t *testing.T) {
				tr := newTree(t)
				p := mustNew(t, Config{Root: tr.ws, Tier: tier})
				dir := tr.expand(tt.dir)
				names, err := p.List(dir, "")
				if tt.by[i] == no {
					wantRefusal(t, err, "path "+quote(dir), "fs scope "+tier.String())
					_, err = p.ResolveList(dir)
					wantRefusal(t, err)
					return
				}
				if err != nil {
					t.Fatalf("List(%q): %v", dir, err)
				}
				if !slices.Contains(names, tt.want) {
					t.Errorf("List(%q) = %q, want it to hold %q", dir, names, tt.want)
				}
			})
		}
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func TestRefusalMessages(t *testing.T) {
	tr := newTree(t)
	sandboxed := mustNew(t, Config{Root: tr.ws})
	project := mustNew(t, Config{Root: tr.ws, Tier: Project})
	tests := []struct {
		name string
		err  func() error
		want string
	}{
		{"dotdot", func() error { _, err := sandboxed.ReadFile("../x"); return err },
			`path "../x" is outside the workspace (fs scope sandboxed: ` + tr.ws + `)`},
		{"link", func() error { _, err := sandboxed.ReadFile("link_out"); return err },
			`path "link_out" resolves through a symbolic link to outside the workspace (fs scope sandboxed: ` + tr.ws + `)`},
		{"project read", func() error { _, err := project.ReadFile("../../outside/secret.txt"); return err },
			`path "../../outside/secret.txt" is outside the git project (fs scope project: reads only under ` + tr.repo + `)`},
		{"project write", func() error { return project.WriteFile("../top.txt", nil) },
			`path "../top.txt" is outside the workspace (fs scope project: writes only inside ` + tr.ws + `)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			wantRefusal(t, err)
			if err.Error() != tt.want {
				t.Errorf("got  %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestPathErrors(t *testing.T) {
	tr := newTree(t)
	p := mustNew(t, Config{Root: tr.ws})
	if _, err := p.ReadFile(""); err == nil || err.Error() != "empty path" {
		t.Errorf("ReadFile(\"\") = %v, want empty path", err)
	}
	if _, err := p.ReadFile("a\x00b"); err == nil || errors.Is(err, ErrNotAllowed) {
		t.Errorf("ReadFile with NUL = %v, want an error", err)
	}
	_, err := p.ReadFile("missing.txt")
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotAllowed) {
		t.Errorf("ReadFile(missing) = %v, want not exist", err)
	}
	if !strings.Contains(err.Error(), `"missing.txt"`) || strings.Contains(err.Error(), tr.ws) {
		t.Errorf("ReadFile(missing) = %q, want the path as written and not the absolute one", err)
	}
	// Out of scope and missing: a refusal, not "does not exist".
	_, err = p.ReadFile("../../outside/missing/x")
	wantRefusal(t, err)
	if ok, err := p.Exists("missing.txt"); ok || err != nil {
		t.Errorf("Exists(missing) = %v, %v", ok, err)
	}
	// A path that does not exist resolves to where it would be.
	if got, err := p.ResolveWrite("sub/x/y.txt"); err != nil || got != filepath.Join(tr.ws, "sub/x/y.txt") {
		t.Errorf("ResolveWrite(sub/x/y.txt) = %q, %v", got, err)
	}
	// A dangling symbolic link in scope cannot be resolved.
	symlink(t, "nowhere", filepath.Join(tr.ws, "dangling"))
	if err := p.WriteFile("dangling", []byte("x")); err == nil || errors.Is(err, ErrNotAllowed) {
		t.Errorf("WriteFile(dangling) = %v, want an error", err)
	}
	if ok, err := p.Exists("dangling"); ok || err != nil {
		t.Errorf("Exists(dangling) = %v, %v, want false", ok, err)
	}
	if _, err := p.ReadFile("in.txt/x"); err == nil || err.Error() != `cannot resolve "in.txt/x": not a directory` {
		t.Errorf("ReadFile(file/x) = %v", err)
	}
	if _, err := p.ReadFile("sub"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("ReadFile(dir) = %v, want is a directory", err)
	}
	if err := p.WriteFile("sub", []byte("x")); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("WriteFile(dir) = %v, want is a directory", err)
	}
	if _, err := p.List("in.txt", ""); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("List(file) = %v, want not a directory", err)
	}
}

func TestProjectGitRoot(t *testing.T) {
	t.Run("git dir", func(t *testing.T) {
		tr := newTree(t)
		p := mustNew(t, Config{Root: filepath.Join(tr.ws, "sub"), Tier: Project})
		if p.GitRoot() != tr.repo || p.ReadRoot() != tr.repo || p.WriteRoot() != filepath.Join(tr.ws, "sub") {
			t.Errorf("GitRoot, ReadRoot, WriteRoot = %q, %q, %q", p.GitRoot(), p.ReadRoot(), p.WriteRoot())
		}
		if data, err := p.ReadFile("../../top.txt"); err != nil || string(data) != "top" {
			t.Errorf("ReadFile(../../top.txt) = %q, %v", data, err)
		}
	})
	t.Run("git file", func(t *testing.T) {
		// A worktree or submodule has a .git file, not a directory.
		base := tempDir(t)
		writeFile(t, filepath.Join(base, "wt", ".git"), "gitdir: /elsewhere\n")
		writeFile(t, filepath.Join(base, "wt", "a.txt"), "a")
		writeFile(t, filepath.Join(base, "wt", "ws", "b.txt"), "b")
		p := mustNew(t, Config{Root: filepath.Join(base, "wt", "ws"), Tier: Project})
		if p.GitRoot() != filepath.Join(base, "wt") {
			t.Errorf("GitRoot = %q", p.GitRoot())
		}
		if _, err := p.ReadFile("../a.txt"); err != nil {
			t.Errorf("ReadFile(../a.txt): %v", err)
		}
	})
	t.Run("no git root", func(t *testing.T) {
		base := tempDir(t)
		if findGitRoot(base) != "" {
			t.Skipf("the temporary directory %s is inside a git work tree", base)
		}
		writeFile(t, filepath.Join(base, "top.txt"), "top")
		writeFile(t, filepath.Join(base, "ws", "in.txt"), "in")
		p := mustNew(t, Config{Root: filepath.Join(base, "ws"), Tier: Project})
		if p.GitRoot() != "" || p.ReadRoot() != filepath.Join(base, "ws") {
			t.Errorf("GitRoot, ReadRoot = %q, %q", p.GitRoot(), p.ReadRoot())
		}
		_, err := p.ReadFile("../top.txt")
		wantRefusal(t, err, "no git root")
		if _, err := p.ReadFile("in.txt"); err != nil {
			t.Error(err)
		}
	})
	t.Run("other tiers ignore git", func(t *testing.T) {
		tr := newTree(t)
		if p := mustNew(t, Config{Root: tr.ws}); p.GitRoot() != "" {
			t.Errorf("sandboxed GitRoot = %q", p.GitRoot())
		}
	})
}

// The race tests run the check step (resolve), then change the file
// system the way an attacker racing the check would, then run the open
// step, which must refuse. Each also shows that opening the checked path
// naively would have escaped, so the test really exercises the race.

func TestRaceDirectorySwappedForLink(t *testing.T) {
	tr := newTree(t)
	writeFile(t, filepath.Join(tr.ws, "data", "f.txt"), "inside")
	writeFile(t, filepath.Join(tr.outside, "f.txt"), "outside")
	p := mustNew(t, Config{Root: tr.ws})

	tgt, err := p.resolve("data/f.txt", accessRead)
	if err != nil {
		t.Fatal(err)
	}
	swap(t, filepath.Join(tr.ws, "data"), tr.outside)
	if naive, _ := os.ReadFile(tgt.abs); string(naive) != "outside" {
		t.Fatalf("the swap did not work: naive read got %q", naive)
	}
	_, err = p.readTarget(tgt)
	wantRefusal(t, err, `path "data/f.txt" changed while being opened and now leads outside the workspace`)
}

func TestRaceFileSwappedForLink(t *testing.T) {
	for _, target := range []string{"$BASE/outside/secret.txt", "../../outside/secret.txt"} {
		t.Run(target, func(t *testing.T) {
			tr := newTree(t)
			p := mustNew(t, Config{Root: tr.ws})
			tgt, err := p.resolve("in.txt", accessRead)
			if err != nil {
				t.Fatal(err)
			}
			swap(t, filepath.Join(tr.ws, "in.txt"), tr.expand(target))
			if naive, _ := os.ReadFile(tgt.abs); string(naive) != "secret" {
				t.Fatalf("the swap did not work: naive read got %q", naive)
			}
			_, err = p.readTarget(tgt)
			wantRefusal(t, err, `path "in.txt" changed while being opened`)

			wt, err := p.resolve("sub/deep.txt", accessWrite)
			if err != nil {
				t.Fatal(err)
			}
			swap(t, filepath.Join(tr.ws, "sub", "deep.txt"), tr.expand(strings.Replace(target, "../", "../../", 1)))
			wantRefusal(t, p.writeTarget(wt, []byte("pwned"), os.O_WRONLY|os.O_TRUNC))
			if got, _ := os.ReadFile(filepath.Join(tr.outside, "secret.txt")); string(got) != "secret" {
				t.Errorf("outside file changed to %q", got)
			}
		})
	}
}

func TestRaceWriteParentCreatedAsLink(t *testing.T) {
	tr := newTree(t)
	p := mustNew(t, Config{Root: tr.ws})
	tgt, err := p.resolve("newdir/x.txt", accessWrite)
	if err != nil {
		t.Fatal(err)
	}
	if tgt.exists {
		t.Fatal("target exists")
	}
	// The missing parent appears, as a link out of the workspace.
	symlink(t, tr.outside, filepath.Join(tr.ws, "newdir"))
	wantRefusal(t, p.writeTarget(tgt, []byte("pwned"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC), `path "newdir/x.txt" changed`)
	if _, err := os.Stat(filepath.Join(tr.outside, "x.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file was created outside: %v", err)
	}
	// The same with a deeper missing path: MkdirAll must not escape either.
	tgt, err = p.resolve("newdir2/a/b/x.txt", accessWrite)
	if err != nil {
		t.Fatal(err)
	}
	symlink(t, tr.outside, filepath.Join(tr.ws, "newdir2"))
	wantRefusal(t, p.writeTarget(tgt, []byte("pwned"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC))
	if _, err := os.Stat(filepath.Join(tr.outside, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a directory was created outside: %v", err)
	}
}

func TestRaceListedDirectorySwapped(t *testing.T) {
	tr := newTree(t)
	p := mustNew(t, Config{Root: tr.ws})
	tgt, err := p.resolve("sub", accessRead)
	if err != nil {
		t.Fatal(err)
	}
	swap(t, filepath.Join(tr.ws, "sub"), tr.outside)
	_, err = p.listTarget(tgt, "")
	wantRefusal(t, err, `path "sub" changed`)
}

func TestRaceProjectScope(t *testing.T) {
	// In the project tier reads are confined to the git root: a swap to a
	// link leaving it is refused, one staying inside is followed.
	tr := newTree(t)
	p := mustNew(t, Config{Root: tr.ws, Tier: Project})
	tgt, err := p.resolve("sub/deep.txt", accessRead)
	if err != nil {
		t.Fatal(err)
	}
	swap(t, filepath.Join(tr.ws, "sub", "deep.txt"), "../../top.txt")
	if data, err := p.readTarget(tgt); err != nil || string(data) != "top" {
		t.Errorf("read through an in-scope link = %q, %v", data, err)
	}
	swap(t, filepath.Join(tr.ws, "sub", "deep.txt"), "../../../outside/secret.txt")
	_, err = p.readTarget(tgt)
	wantRefusal(t, err, "fs scope project")
}

// swap replaces path (a file or directory) by a symbolic link to target.
func swap(t *testing.T, path, target string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	symlink(t, target, path)
}

// TestDirInside: a directory of a root, by a relative or absolute path,
// also through a link that stays inside; escapes through "..", an
// absolute path or a link are refusals; missing paths and files are
// errors.
func TestDirInside(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	out := t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	os.WriteFile(filepath.Join(root, "f"), nil, 0o644)
	os.Symlink(filepath.Join(root, "a"), filepath.Join(root, "in"))
	os.Symlink(out, filepath.Join(root, "out"))
	for path, want := range map[string]string{"a": "a", "a/b/..": "a", filepath.Join(root, "a", "b"): "a/b", "in/b": "a/b", ".": ""} {
		got, err := DirInside(root, path)
		if err != nil || got != filepath.Join(root, want) {
			t.Errorf("DirInside(%q) = %q, %v; want %q", path, got, err, filepath.Join(root, want))
		}
	}
	for path, want := range map[string]string{
		"..":      "is outside the workspace root",
		"a/../..": "is outside the workspace root",
		out:       "is outside the workspace root",
		"out":     "resolves through a symbolic link to outside",
		"out/x":   "resolves through a symbolic link to outside", // missing, but the link leads out first
	} {
		_, err := DirInside(root, path)
		if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), want) {
			t.Errorf("DirInside(%q) = %v, want a refusal %q", path, err, want)
		}
	}
	if _, err := DirInside(root, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := DirInside(root, "f"); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file: %v", err)
	}
	if _, err := DirInside(root, ""); err == nil {
		t.Error("empty path")
	}
}
