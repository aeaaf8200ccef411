package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseTier(t *testing.T) {
	for _, tier := range tiers {
		if got, err := ParseTier(tier.String()); got != tier || err != nil {
			t.Errorf("ParseTier(%q) = %v, %v", tier, got, err)
		}
	}
	if _, err := ParseTier("Full"); err == nil || err.Error() != `invalid fs scope "Full" (want sandboxed, project or full)` {
		t.Errorf("ParseTier(Full) = %v", err)
	}
}

func TestNew(t *testing.T) {
	tr := newTree(t)
	p := mustNew(t, Config{Root: filepath.Join(tr.ws, "dirlink_in", ".."), AllowCmds: []string{"go", "git", "go"}, AllowNet: []string{"API.example.com"}})
	// The root is cleaned lexically first (dirlink_in/.. is ws), then its
	// links resolved.
	if p.Root() != tr.ws || p.Tier() != Sandboxed {
		t.Errorf("Root, Tier = %q, %v", p.Root(), p.Tier())
	}
	if !reflect.DeepEqual(p.AllowCmds(), []string{"go", "git"}) || !reflect.DeepEqual(p.AllowNet(), []string{"api.example.com"}) {
		t.Errorf("AllowCmds, AllowNet = %q, %q", p.AllowCmds(), p.AllowNet())
	}
	want := "fs scope sandboxed: " + tr.ws + "; commands: go, git; net: api.example.com"
	if p.String() != want {
		t.Errorf("String() = %q, want %q", p, want)
	}
	// Accessors return copies.
	p.AllowCmds()[0] = "rm"
	if p.AllowCmds()[0] != "go" {
		t.Error("AllowCmds exposes the policy's slice")
	}
	if p := mustNew(t, Config{Root: filepath.Join(tr.ws, "dirlink_out")}); p.Root() != tr.outside {
		t.Errorf("root behind a link: %q", p.Root())
	}

	bad := []struct {
		c    Config
		want string
	}{
		{Config{}, "empty workspace root"},
		{Config{Root: filepath.Join(tr.ws, "nope")}, "workspace root: lstat"},
		{Config{Root: filepath.Join(tr.ws, "in.txt")}, "is not a directory"},
		{Config{Root: tr.ws, Tier: 7}, "invalid fs scope Tier(7)"},
		{Config{Root: tr.ws, AllowCmds: []string{""}}, `invalid command allowlist entry ""`},
		{Config{Root: tr.ws, AllowCmds: []string{" go"}}, `invalid command allowlist entry " go"`},
		{Config{Root: tr.ws, AllowNet: []string{"a b"}}, `invalid network allowlist entry "a b"`},
	}
	for _, b := range bad {
		if _, err := New(b.c); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("New(%+v) = %v, want %q", b.c, err, b.want)
		}
	}
}

// A Policy that New did not build refuses everything rather than allowing
// everything (its empty root would contain every path).
func TestZeroPolicy(t *testing.T) {
	var p Policy
	const want = "workspace policy not initialised (use workspace.New)"
	if _, err := p.ReadFile("/etc/hostname"); err == nil || err.Error() != want {
		t.Errorf("ReadFile = %v", err)
	}
	if err := p.WriteFile("x", nil); err == nil || err.Error() != want {
		t.Errorf("WriteFile = %v", err)
	}
	if _, err := p.Run(t.Context(), []string{"sh"}, RunOptions{}); err == nil || err.Error() != want {
		t.Errorf("Run = %v", err)
	}
	if _, err := p.Do(t.Context(), HTTPRequest{URL: "http://127.0.0.1/"}); err == nil || err.Error() != want {
		t.Errorf("Do = %v", err)
	}
	if _, err := p.HTTPClient().Get("http://127.0.0.1:1/"); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("HTTPClient().Get = %v", err)
	}
}

func list(items ...string) *[]string { return &items }

func TestNarrow(t *testing.T) {
	tr := newTree(t)
	// A nested repository inside the workspace, for the project tier.
	if err := os.MkdirAll(filepath.Join(tr.ws, "sub", "nested", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	full := mustNew(t, Config{
		Root:      tr.ws,
		Tier:      Full,
		AllowCmds: []string{"go", "git", "pytest"},
		AllowNet:  []string{"*.example.com", "db.internal", "10.0.0.5", "cache.internal:6379"},
	})
	tests := []struct {
		name  string
		from  *Policy
		n     Narrowing
		check func(t *testing.T, q *Policy)
		want  string // error; "" for ok
	}{
		{name: "nothing", from: full, check: func(t *testing.T, q *Policy) {
			if q.Tier() != Full || q.Root() != tr.ws || len(q.AllowCmds()) != 3 || len(q.AllowNet()) != 4 {
				t.Errorf("unchanged narrowing changed %s", q)
			}
		}},
		{name: "tier to project", from: full, n: Narrowing{Tier: Project}, check: func(t *testing.T, q *Policy) {
			if q.Tier() != Project || q.GitRoot() != tr.repo {
				t.Errorf("Tier, GitRoot = %v, %q", q.Tier(), q.GitRoot())
			}
		}},
		{name: "tier to sandboxed", from: full, n: Narrowing{Tier: Sandboxed}, check: func(t *testing.T, q *Policy) {
			if q.Tier() != Sandboxed || q.ReadRoot() != tr.ws {
				t.Errorf("Tier, ReadRoot = %v, %q", q.Tier(), q.ReadRoot())
			}
		}},
		{name: "widen sandboxed to full", from: mustNew(t, Config{Root: tr.ws}), n: Narrowing{Tier: Full},
			want: "cannot widen fs scope from sandboxed to full"},
		{name: "widen project to full", from: mustNew(t, Config{Root: tr.ws, Tier: Project}), n: Narrowing{Tier: Full},
			want: "cannot widen fs scope from project to full"},
		{name: "widen sandboxed to project", from: mustNew(t, Config{Root: tr.ws}), n: Narrowing{Tier: Project},
			want: "cannot widen fs scope from sandboxed to project"},
		{name: "root to a sub-directory", from: full, n: Narrowing{Root: "sub"}, check: func(t *testing.T, q *Policy) {
			if q.Root() != filepath.Join(tr.ws, "sub") {
				t.Errorf("Root = %q", q.Root())
			}
		}},
		{name: "root through an inner link", from: full, n: Narrowing{Root: "dirlink_in"}, check: func(t *testing.T, q *Policy) {
			if q.Root() != filepath.Join(tr.ws, "sub") {
				t.Errorf("Root = %q", q.Root())
			}
		}},
		{name: "root absolute inside", from: full, n: Narrowing{Root: filepath.Join(tr.ws, "sub")}, check: func(t *testing.T, q *Policy) {
			if q.Root() != filepath.Join(tr.ws, "sub") {
				t.Errorf("Root = %q", q.Root())
			}
		}},
		{name: "project root into a nested repository", from: mustNew(t, Config{Root: tr.ws, Tier: Project}),
			n: Narrowing{Root: "sub/nested"}, check: func(t *testing.T, q *Policy) {
				if q.GitRoot() != filepath.Join(tr.ws, "sub", "nested") {
					t.Errorf("GitRoot = %q", q.GitRoot())
				}
			}},
		{name: "widen root with ..", from: full, n: Narrowing{Root: ".."},
			want: `cannot widen the workspace root: ".." is outside ` + tr.ws},
		{name: "widen root to an absolute path", from: full, n: Narrowing{Root: tr.outside},
			want: `cannot widen the workspace root: "` + tr.outside + `" is outside ` + tr.ws},
		{name: "widen root through a link", from: full, n: Narrowing{Root: "dirlink_out"},
			want: `cannot widen the workspace root: "dirlink_out" is outside ` + tr.ws},
		{name: "root missing", from: full, n: Narrowing{Root: "nope"}, want: "workspace root: lstat"},
		{name: "commands subset", from: full, n: Narrowing{AllowCmds: list("git")}, check: func(t *testing.T, q *Policy) {
			if !reflect.DeepEqual(q.AllowCmds(), []string{"git"}) {
				t.Errorf("AllowCmds = %q", q.AllowCmds())
			}
		}},
		{name: "commands none", from: full, n: Narrowing{AllowCmds: list()}, check: func(t *testing.T, q *Policy) {
			if len(q.AllowCmds()) != 0 {
				t.Errorf("AllowCmds = %q", q.AllowCmds())
			}
		}},
		{name: "widen commands", from: full, n: Narrowing{AllowCmds: list("git", "rm")},
			want: `cannot widen the command allowlist: "rm" is not on it (allowed: go, git, pytest)`},
		{name: "hosts subset", from: full,
			n: Narrowing{AllowNet: list("api.example.com", "*.eu.example.com", "db.internal:5432", "10.0.0.5:80", "cache.internal:6379")},
			check: func(t *testing.T, q *Policy) {
				if len(q.AllowNet()) != 5 {
					t.Errorf("AllowNet = %q", q.AllowNet())
				}
			}},
		{name: "hosts none", from: full, n: Narrowing{AllowNet: list()}, check: func(t *testing.T, q *Policy) {
			if len(q.AllowNet()) != 0 {
				t.Errorf("AllowNet = %q", q.AllowNet())
			}
		}},
		{name: "widen hosts", from: full, n: Narrowing{AllowNet: list("evil.com")},
			want: `cannot widen the network allowlist: "evil.com" is not covered by it (allowed: *.example.com, db.internal, 10.0.0.5, cache.internal:6379)`},
		{name: "widen hosts to the apex", from: full, n: Narrowing{AllowNet: list("example.com")}, want: `"example.com" is not covered`},
		{name: "widen hosts to *", from: full, n: Narrowing{AllowNet: list("*")}, want: `"*" is not covered`},
		{name: "widen a port", from: full, n: Narrowing{AllowNet: list("cache.internal")}, want: `"cache.internal" is not covered`},
		{name: "widen a port to another", from: full, n: Narrowing{AllowNet: list("cache.internal:80")}, want: `"cache.internal:80" is not covered`},
		{name: "widen to an address", from: full, n: Narrowing{AllowNet: list("10.0.0.6")}, want: `"10.0.0.6" is not covered`},
		{name: "bad host entry", from: full, n: Narrowing{AllowNet: list("a/b")}, want: `invalid network allowlist entry "a/b"`},
		{name: "bad tier", from: full, n: Narrowing{Tier: 9}, want: "invalid fs scope Tier(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.from.String()
			q, err := tt.from.Narrow(tt.n)
			if tt.from.String() != before {
				t.Errorf("Narrow changed the original: %s", tt.from)
			}
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Narrow(%+v) = %v, want an error containing %q", tt.n, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Narrow(%+v): %v", tt.n, err)
			}
			tt.check(t, q)
		})
	}
}

// An exact host narrowed from a wildcard must not gain the exemption for
// private addresses that only an exact entry grants.
func TestNarrowKeepsPrivateAddressRule(t *testing.T) {
	wild := netPolicy(t, "*.example.com")
	q, err := wild.Narrow(Narrowing{AllowNet: list("api.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, explicit := q.hostAllowed("api.example.com", "80"); !ok || explicit {
		t.Errorf("narrowed from a wildcard: allowed %v, explicit %v", ok, explicit)
	}
	exact := netPolicy(t, "*.example.com", "api.example.com")
	q, err = exact.Narrow(Narrowing{AllowNet: list("api.example.com:8080")})
	if err != nil {
		t.Fatal(err)
	}
	if ok, explicit := q.hostAllowed("api.example.com", "8080"); !ok || !explicit {
		t.Errorf("narrowed from an exact entry: allowed %v, explicit %v", ok, explicit)
	}
	// The narrowed policy keeps the resolver and applies the rule.
	_, port := newServer(t)
	q, _ = wild.Narrow(Narrowing{AllowNet: list("api.example.com")})
	_, err = q.Do(t.Context(), HTTPRequest{URL: "http://api.example.com:" + port + "/ok"})
	wantRefusal(t, err, "resolves to a loopback address")
}

// TestWithRoot: WithRoot moves a policy to another root, which need not
// be inside the old one, keeping its tier and allowlists; the new root's
// links are resolved and a missing root is an error. NewContext and
// FromContext carry a policy.
func TestWithRoot(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(b, "f.txt"), []byte("in b"), 0o644)
	os.Symlink(b, filepath.Join(a, "to-b"))
	p := mustNew(t, Config{Root: a, AllowCmds: []string{"go"}, AllowNet: []string{"example.com"}, AllowEnv: []string{"LANG"}})
	q, err := p.WithRoot(filepath.Join(a, "to-b"))
	if err != nil {
		t.Fatal(err)
	}
	realB, _ := filepath.EvalSymlinks(b)
	if q.Root() != realB || q.Tier() != Sandboxed || !reflect.DeepEqual(q.AllowCmds(), []string{"go"}) ||
		!reflect.DeepEqual(q.AllowNet(), []string{"example.com"}) || !reflect.DeepEqual(q.AllowEnv(), []string{"LANG"}) {
		t.Fatalf("WithRoot: %v", q)
	}
	if data, err := q.ReadFile("f.txt"); err != nil || string(data) != "in b" {
		t.Fatalf("read in the new root: %q, %v", data, err)
	}
	if _, err := q.ReadFile(filepath.Join(a, "x")); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("read in the old root: %v", err)
	}
	if p.Root() == q.Root() {
		t.Fatal("WithRoot changed p")
	}
	if _, err := p.WithRoot(filepath.Join(a, "missing")); err == nil || !strings.Contains(err.Error(), "workspace root") {
		t.Fatalf("missing root: %v", err)
	}
	if _, err := (&Policy{}).WithRoot(b); err == nil {
		t.Fatal("WithRoot of the zero Policy")
	}
	ctx := NewContext(t.Context(), q)
	if FromContext(ctx) != q || FromContext(t.Context()) != nil {
		t.Fatal("FromContext")
	}
}
