package builtins_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// testSecret is the value of $SKEIN_TEST_SECRET in the Starlark tests.
// No test's output, error or failure may ever contain it.
const testSecret = "s3cr3t-value-never-shown"

// workspaceFiles are the Starlark test files that use the workspace, with
// the policy each test VM gets. Root is filled in with a fresh tree (see
// newWorkspaceTree); "$ALLOWED" in AllowNet stands for the allowed test
// server's host:port.
var workspaceFiles = map[string]workspace.Config{
	"fs_test.star":        {},
	"exec_test.star":      {AllowCmds: []string{"sh", "cat"}, AllowEnv: []string{"GREETING", "HOME_SET"}},
	"http_test.star":      {AllowNet: []string{"$ALLOWED"}},
	"secret_test.star":    {AllowCmds: []string{"sh"}, AllowNet: []string{"$ALLOWED"}, AllowEnv: []string{"*", "EXPECTED", "T"}},
	"tools_test.star":     {Tier: workspace.Full, AllowCmds: []string{"sh", "cat"}, AllowNet: []string{"$ALLOWED"}},
	"workspace_test.star": {Tier: workspace.Full, AllowCmds: []string{"sh", "cat"}, AllowNet: []string{"$ALLOWED", "*.example.com"}},
}

// workspaceSetup returns, for a file of workspaceFiles, what to do to the
// options of each of its test VMs: a fresh tree as the workspace, the
// file's policy, and a predeclared `fixture` struct
// {root, base, url, refused_url}. It starts the file's test servers. It
// returns nil for other files.
func workspaceSetup(t *testing.T, file string) func(opts *vm.Options) error {
	config, ok := workspaceFiles[filepath.Base(file)]
	if !ok {
		return nil
	}
	if runtime.GOOS == "windows" {
		t.Skip("the workspace tests use sh, cat and symbolic links")
	}
	t.Setenv("SKEIN_TEST_SECRET", testSecret)
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the refused server")
	}))
	t.Cleanup(refused.Close)
	allowed := httptest.NewServer(testHandler(refused.URL))
	t.Cleanup(allowed.Close)
	host := strings.TrimPrefix(allowed.URL, "http://")
	return func(opts *vm.Options) error {
		base, root, err := newWorkspaceTree()
		if err != nil {
			return err
		}
		t.Cleanup(func() { os.RemoveAll(base) })
		c := config
		c.Root = root
		c.AllowNet = nil
		for _, h := range config.AllowNet {
			c.AllowNet = append(c.AllowNet, strings.ReplaceAll(h, "$ALLOWED", host))
		}
		if opts.Workspace, err = workspace.New(c); err != nil {
			return err
		}
		fixture := starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"root":        starlark.String(root),
			"base":        starlark.String(base),
			"url":         starlark.String(allowed.URL),
			"host":        starlark.String(host),
			"refused_url": starlark.String(refused.URL),
		})
		fixture.Freeze()
		if opts.Builtins == nil {
			opts.Builtins = starlark.StringDict{}
		}
		opts.Builtins["fixture"] = fixture
		return nil
	}
}

// newWorkspaceTree makes the tree the workspace tests share and returns
// its base and the workspace root:
//
//	base/outside/secret.txt
//	base/repo/.git/
//	base/repo/top.txt
//	base/repo/ws/                        the workspace root
//	base/repo/ws/in.txt                  "hello\nworld\n"
//	base/repo/ws/data.jsonl, data.csv
//	base/repo/ws/src/main.go, src/util.go, src/blob.bin
//	base/repo/ws/link_in     -> in.txt
//	base/repo/ws/link_out    -> base/outside/secret.txt
//	base/repo/ws/dirlink_out -> base/outside
func newWorkspaceTree() (base, root string, err error) {
	dir, err := os.MkdirTemp("", "skein-ws")
	if err != nil {
		return "", "", err
	}
	if base, err = filepath.EvalSymlinks(dir); err != nil {
		return "", "", err
	}
	root = filepath.Join(base, "repo", "ws")
	files := map[string]string{
		"outside/secret.txt":   "outside the workspace\n",
		"repo/top.txt":         "top of the project\n",
		"repo/ws/in.txt":       "hello\nworld\n",
		"repo/ws/data.jsonl":   "{\"q\": \"2+2\", \"a\": 4}\n\n{\"q\": \"big\", \"a\": 12345678901234567890, \"tags\": [\"x\"], \"score\": 0.5}\n",
		"repo/ws/data.csv":     "question,answer\n\"2+2\",4\n\"a, b\",\"say \"\"hi\"\"\"\n",
		"repo/ws/src/main.go":  "package main\n\nfunc main() {\n\tprintln(greet())\n}\n",
		"repo/ws/src/util.go":  "package main\n\n// TODO: localise\nfunc greet() string { return \"hello\" }\n",
		"repo/ws/src/blob.bin": "func \x00 binary\n",
	}
	for name, content := range files {
		path := filepath.Join(base, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", "", err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return "", "", err
		}
	}
	if err := os.MkdirAll(filepath.Join(base, "repo", ".git"), 0o755); err != nil {
		return "", "", err
	}
	links := map[string]string{
		"link_in":     "in.txt",
		"link_out":    filepath.Join(base, "outside", "secret.txt"),
		"dirlink_out": filepath.Join(base, "outside"),
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			return "", "", err
		}
	}
	return base, root, nil
}

// testHandler is the allowed test server. refused is the URL of a server
// the policy does not allow.
func testHandler(refused string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Reply", "yes")
		io.WriteString(w, "hello from the allowed server")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"method": %q, "body": %q, "x_test": %q}`, r.Method, body, r.Header.Get("X-Test"))
	})
	// /echo-auth is a careless server: it echoes the Authorization
	// header in its body and in a response header.
	mux.HandleFunc("/echo-auth", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen", r.Header.Get("Authorization"))
		io.WriteString(w, "you sent "+r.Header.Get("Authorization"))
	})
	// /auth says whether the secret arrived, never what arrived.
	mux.HandleFunc("/auth", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testSecret {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, "denied")
			return
		}
		io.WriteString(w, "authorized")
	})
	mux.HandleFunc("/redirect-in", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/hello", http.StatusFound)
	})
	mux.HandleFunc("/redirect-out", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, refused+"/hello", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := strings.Repeat("x", 1<<20)
		for range 11 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page: "+url.PathEscape(r.URL.Path), http.StatusNotFound)
	})
	return mux
}
