package builtins_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// TestWorkspaceCallsHonourCancellation: a command or a request that
// blocks is stopped by the run's cancellation (Ctrl-C, --timeout), and by
// an agent loop's timeout_s when a tool makes it.
func TestWorkspaceCallsHonourCancellation(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("uses sh")
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	defer slow.Close()
	newState := func(t *testing.T) *vm.State {
		p, err := workspace.New(workspace.Config{Root: t.TempDir(), AllowCmds: []string{"sh"}, AllowNet: []string{strings.TrimPrefix(slow.URL, "http://")}})
		if err != nil {
			t.Fatal(err)
		}
		st, err := builtins.NewTestState(vm.Options{Stdout: io.Discard, Workspace: p}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tt := range []struct{ name, src, want string }{
		{"exec", `exec.run(["sh", "-c", "sleep 30"])`, `exec.run: "sh" cancelled: timeout: test deadline`},
		{"http", `http.get(URL, timeout_s = 60)`, "http.get: GET " + slow.URL + " cancelled: timeout: test deadline"},
		{"tool", `
llm_mock(tool_calls = [{"name": "run_command", "arguments": {"argv": ["sh", "-c", "sleep 30"]}}])
agent_loop("go", tools = [tools.run_command])`, "timeout: test deadline"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := newState(t)
			ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, errors.New("timeout: test deadline"))
			defer cancel()
			end := st.Begin(ctx)
			defer end()
			start := time.Now()
			_, err := st.ExecFile("cancel.star", strings.ReplaceAll(tt.src, "URL", `"`+slow.URL+`"`))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("cancellation took %v", d)
			}
		})
	}
	t.Run("loop timeout", func(t *testing.T) {
		st := newState(t)
		end := st.Begin(context.Background())
		defer end()
		_, err := st.ExecFile("timeout.star", `
llm_mock(tool_calls = [{"name": "run_command", "arguments": {"argv": ["sh", "-c", "sleep 30"]}}])
r = agent_loop("go", tools = [tools.run_command], timeout_s = 0.3)
if r["status"] != "timeout":
    fail(r)
`)
		if err != nil {
			t.Fatal(vm.FormatError(err))
		}
	})
}
