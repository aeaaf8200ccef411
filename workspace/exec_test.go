//go:build unix

package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as a child process for Run: with
// SKEIN_WORKSPACE_HELPER=flood it writes 64 MiB to stdout and to stderr.
func TestMain(m *testing.M) {
	switch os.Getenv("SKEIN_WORKSPACE_HELPER") {
	case "":
		os.Exit(m.Run())
	case "flood":
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
		for range floodBytes / len(chunk) {
			os.Stdout.Write(chunk)
			os.Stderr.Write(chunk)
		}
		os.Exit(7)
	}
	os.Exit(99)
}

const floodBytes = 64 << 20

func needBins(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s is not installed: %v", n, err)
		}
	}
}

func TestRunAllowlist(t *testing.T) {
	needBins(t, "echo", "sh")
	root := tempDir(t)
	ctx := context.Background()
	tests := []struct {
		allow []string
		argv  []string
		want  string // "" for allowed
	}{
		{nil, []string{"echo", "hi"}, `command "echo" is not allowed (no commands are allowed; use --allow-cmd)`},
		{[]string{"go", "git"}, []string{"rm", "-rf", "/"}, `command "rm" is not allowed (allowed: go, git)`},
		{[]string{"echo"}, []string{"/bin/echo", "hi"}, `command "/bin/echo" is not allowed (allowed: echo; a command with a path must be allowed as written)`},
		{[]string{"echo"}, []string{"./echo"}, `command "./echo" is not allowed (allowed: echo; a command with a path must be allowed as written)`},
		{[]string{"echo"}, []string{"sh", "-c", "echo hi"}, `command "sh" is not allowed (allowed: echo)`},
		{[]string{"echo"}, []string{"echo", "hi"}, ""},
		{[]string{"sh"}, []string{"sh", "-c", "echo hi"}, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.argv, " "), func(t *testing.T) {
			p := mustNew(t, Config{Root: root, AllowCmds: tt.allow})
			res, err := p.Run(ctx, tt.argv, RunOptions{})
			if tt.want != "" {
				wantRefusal(t, err)
				if err.Error() != tt.want {
					t.Errorf("got  %s\nwant %s", err, tt.want)
				}
				return
			}
			if err != nil || res.Code != 0 || res.Stdout != "hi\n" {
				t.Errorf("Run = %+v, %v", res, err)
			}
		})
	}
	t.Run("path entry", func(t *testing.T) {
		sh, _ := exec.LookPath("sh")
		p := mustNew(t, Config{Root: root, AllowCmds: []string{sh}})
		if res, err := p.Run(ctx, []string{sh, "-c", "echo hi"}, RunOptions{}); err != nil || res.Stdout != "hi\n" {
			t.Errorf("Run(%s) = %+v, %v", sh, res, err)
		}
		writeFile(t, filepath.Join(root, "tool.sh"), "#!/bin/sh\necho tool \"$@\"\n")
		os.Chmod(filepath.Join(root, "tool.sh"), 0o755)
		p = mustNew(t, Config{Root: root, AllowCmds: []string{"./tool.sh"}})
		if res, err := p.Run(ctx, []string{"./tool.sh", "x"}, RunOptions{}); err != nil || res.Stdout != "tool x\n" {
			t.Errorf("Run(./tool.sh) = %+v, %v", res, err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		p := mustNew(t, Config{Root: root, AllowCmds: []string{"skein-no-such-command"}})
		_, err := p.Run(ctx, []string{"skein-no-such-command"}, RunOptions{})
		if err == nil || err.Error() != `command "skein-no-such-command" not found in PATH` || errors.Is(err, ErrNotAllowed) {
			t.Errorf("Run(missing) = %v", err)
		}
	})
	t.Run("allowlist before working directory", func(t *testing.T) {
		p := mustNew(t, Config{Root: root, AllowCmds: []string{"sh"}})
		_, err := p.Run(ctx, []string{"rm"}, RunOptions{Dir: "/"})
		wantRefusal(t, err, `command "rm" is not allowed`)
	})
	t.Run("empty", func(t *testing.T) {
		p := mustNew(t, Config{Root: root, AllowCmds: []string{"sh"}})
		if _, err := p.Run(ctx, nil, RunOptions{}); err == nil || err.Error() != "empty command" {
			t.Errorf("Run(nil) = %v", err)
		}
	})
}

func TestRunResult(t *testing.T) {
	needBins(t, "sh", "cat", "pwd")
	tr := newTree(t)
	p := mustNew(t, Config{Root: tr.ws, AllowCmds: []string{"sh", "cat", "pwd"}})
	ctx := context.Background()

	t.Run("exit code is a result", func(t *testing.T) {
		res, err := p.Run(ctx, []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, RunOptions{})
		if err != nil || res.Code != 3 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Truncated || res.TimedOut {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("signal", func(t *testing.T) {
		res, err := p.Run(ctx, []string{"sh", "-c", "kill -TERM $$"}, RunOptions{})
		if err != nil || res.Code != 128+int(syscall.SIGTERM) {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		res, err := p.Run(ctx, []string{"cat"}, RunOptions{Stdin: "hello\nworld"})
		if err != nil || res.Stdout != "hello\nworld" {
			t.Errorf("Run = %+v, %v", res, err)
		}
		// A command that does not read a large input still finishes.
		res, err = p.Run(ctx, []string{"sh", "-c", "exit 0"}, RunOptions{Stdin: strings.Repeat("x", 4<<20)})
		if err != nil || res.Code != 0 {
			t.Errorf("Run ignoring stdin = %+v, %v", res, err)
		}
		res, err = p.Run(ctx, []string{"cat"}, RunOptions{})
		if err != nil || res.Stdout != "" {
			t.Errorf("Run with no stdin = %+v, %v", res, err)
		}
	})
	t.Run("working directory", func(t *testing.T) {
		res, err := p.Run(ctx, []string{"pwd", "-P"}, RunOptions{})
		if err != nil || res.Stdout != tr.ws+"\n" {
			t.Errorf("pwd = %+v, %v", res, err)
		}
		res, err = p.Run(ctx, []string{"pwd", "-P"}, RunOptions{Dir: "sub"})
		if err != nil || res.Stdout != filepath.Join(tr.ws, "sub")+"\n" {
			t.Errorf("pwd in sub = %+v, %v", res, err)
		}
		_, err = p.Run(ctx, []string{"pwd"}, RunOptions{Dir: ".."})
		wantRefusal(t, err, `path ".."`)
		_, err = p.Run(ctx, []string{"pwd"}, RunOptions{Dir: "dirlink_out"})
		wantRefusal(t, err)
		if _, err := p.Run(ctx, []string{"pwd"}, RunOptions{Dir: "in.txt"}); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("Dir file = %v", err)
		}
		if _, err := p.Run(ctx, []string{"pwd"}, RunOptions{Dir: "nope"}); err == nil {
			t.Error("Dir missing: no error")
		}
	})
	t.Run("output cap", func(t *testing.T) {
		res, err := p.Run(ctx, []string{"sh", "-c", "printf '%0100d' 0; printf 'é' >&2"}, RunOptions{MaxOutput: 10})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Truncated || res.Stdout != "0000000000\n[truncated: 90 more bytes]" {
			t.Errorf("Stdout = %q, Truncated %v", res.Stdout, res.Truncated)
		}
		if res.Stderr != "é" {
			t.Errorf("Stderr = %q", res.Stderr)
		}
		res, _ = p.Run(ctx, []string{"sh", "-c", "printf 'aé'"}, RunOptions{MaxOutput: 2})
		if res.Stdout != "a\n[truncated: 2 more bytes]" {
			t.Errorf("a cut character: Stdout = %q", res.Stdout)
		}
	})
}

func TestRunEnvironment(t *testing.T) {
	needBins(t, "sh")
	t.Setenv("FOO_API_KEY", "sk-parent-secret")
	t.Setenv("SKEIN_TEST_UNLISTED", "unlisted")
	t.Setenv("LANG", "C.UTF-8")
	p := mustNew(t, Config{Root: tempDir(t), AllowCmds: []string{"sh"}, AllowEnv: []string{"*", "BAR"}})
	res, err := p.Run(context.Background(), []string{"sh", "-c", "env"}, RunOptions{
		Env:       map[string]string{"BAR": "baz", "LANG": "C"},
		SecretEnv: map[string]Secret{"TOKEN": NewSecret("MY_TOKEN", "tok-123")},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := res.Stdout
	for _, bad := range []string{"FOO_API_KEY", "sk-parent-secret", "SKEIN_TEST_UNLISTED"} {
		if strings.Contains(env, bad) {
			t.Errorf("the child saw %s:\n%s", bad, env)
		}
	}
	for _, good := range []string{"\nBAR=baz\n", "\nLANG=C\n", "\nTOKEN=tok-123\n", "PATH="} {
		if !strings.Contains("\n"+env, good) {
			t.Errorf("the child did not see %q:\n%s", good, env)
		}
	}
	for _, bad := range []map[string]string{{"A=B": "x"}, {"": "x"}, {"A": "x\x00y"}} {
		if _, err := p.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: bad}); err == nil {
			t.Errorf("Env %q accepted", bad)
		}
	}
	_, err = p.Run(context.Background(), []string{"sh"}, RunOptions{SecretEnv: map[string]Secret{"S": NewSecret("S", "v\x00zzhiddenzz")}})
	if err == nil || strings.Contains(err.Error(), "zzhiddenzz") {
		t.Errorf("bad secret env = %v", err)
	}
}

// processGone reports whether pid has exited (or is a zombie waiting for
// a parent that is not us).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunTimeoutKillsGroup(t *testing.T) {
	needBins(t, "sh", "sleep")
	root := tempDir(t)
	p := mustNew(t, Config{Root: root, AllowCmds: []string{"sh"}})
	// The timeout must pass after the script started its background
	// child: on a loaded machine the shell may not get that far in
	// 300ms, and the run is tried again with twice the timeout. Once
	// child.pid holds the child's pid, "started" has been written.
	pidFile := filepath.Join(root, "child.pid")
	for timeout := 300 * time.Millisecond; ; timeout *= 2 {
		os.Remove(pidFile)
		start := time.Now()
		res, err := p.Run(context.Background(), []string{"sh", "-c", "echo started; sleep 30 & echo $! > child.pid; sleep 30"},
			RunOptions{Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed > timeout+10*time.Second {
			t.Errorf("Run took %v with a timeout of %v", elapsed, timeout)
		}
		if !res.TimedOut || res.Code != -1 {
			t.Fatalf("Run = %+v", res)
		}
		data, err := os.ReadFile(pidFile)
		notYet := errors.Is(err, os.ErrNotExist) || err == nil && strings.TrimSpace(string(data)) == ""
		if notYet && timeout < 20*time.Second {
			t.Logf("the script had not started its child after %v: trying again", timeout)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "started\n" {
			t.Errorf("Run = %+v", res)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatal(err)
		}
		waitGone(t, pid)
		return
	}
}

func TestRunExitKillsLeftovers(t *testing.T) {
	needBins(t, "sh", "sleep")
	p := mustNew(t, Config{Root: tempDir(t), AllowCmds: []string{"sh"}})
	start := time.Now()
	// The background sleep holds stdout open; Run must not wait for it.
	res, err := p.Run(context.Background(), []string{"sh", "-c", "sleep 30 & echo $!"}, RunOptions{})
	if err != nil || res.Code != 0 || res.TimedOut {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Run took %v", elapsed)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(res.Stdout))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
}

func TestRunCancel(t *testing.T) {
	needBins(t, "sh", "sleep")
	p := mustNew(t, Config{Root: tempDir(t), AllowCmds: []string{"sh"}})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := p.Run(ctx, []string{"sh", "-c", "echo partial; sleep 30"}, RunOptions{})
	if !errors.Is(err, context.Canceled) || res == nil || res.Code != -1 || res.TimedOut || res.Stdout != "partial\n" {
		t.Errorf("Run = %+v, %v", res, err)
	}
	if _, err := p.Run(ctx, []string{"sh"}, RunOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Run with a done context = %v", err)
	}
}

// Huge output is capped and memory stays bounded: 128 MiB of output
// must not cost more than a few MiB of allocation. Not parallel: it
// measures the process's allocations.
func TestRunHugeOutputBoundedMemory(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	p := mustNew(t, Config{Root: tempDir(t), AllowCmds: []string{self}, AllowEnv: []string{"SKEIN_WORKSPACE_HELPER"}})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	res, err := p.Run(context.Background(), []string{self}, RunOptions{
		Env:       map[string]string{"SKEIN_WORKSPACE_HELPER": "flood"},
		MaxOutput: 1 << 20,
	})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 7 || !res.Truncated {
		t.Errorf("Code %d, Truncated %v", res.Code, res.Truncated)
	}
	marker := fmt.Sprintf("\n[truncated: %d more bytes]", floodBytes-(1<<20))
	for name, out := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
		if len(out) != 1<<20+len(marker) || !strings.HasSuffix(out, marker) {
			t.Errorf("%s: %d bytes ending %q", name, len(out), out[max(0, len(out)-40):])
		}
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
		t.Errorf("allocated %d MiB for %d MiB of output", alloc>>20, 2*floodBytes>>20)
	}
}

// TestRunEnvAllowlist: a script may set only the environment variables
// the policy allows, and never one that makes a command load or run other
// code (LD_PRELOAD with only "echo" allowed runs anything).
func TestRunEnvAllowlist(t *testing.T) {
	needBins(t, "sh")
	dir := tempDir(t)
	none := mustNew(t, Config{Root: dir, AllowCmds: []string{"sh"}})
	_, err := none.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: map[string]string{"GREETING": "hi"}})
	if err == nil || !errors.Is(err, ErrNotAllowed) || err.Error() != `environment variable "GREETING" is not allowed (no variables are allowed; use --allow-env)` {
		t.Errorf("no allowlist: err = %v", err)
	}
	_, err = none.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{SecretEnv: map[string]Secret{"TOKEN": NewSecret("T", "v")}})
	if err == nil || !errors.Is(err, ErrNotAllowed) {
		t.Errorf("no allowlist, a secret: err = %v", err)
	}

	p := mustNew(t, Config{Root: dir, AllowCmds: []string{"sh"}, AllowEnv: []string{"GREETING", "APP_*"}})
	res, err := p.Run(context.Background(), []string{"sh", "-c", `echo "$GREETING $APP_MODE"`}, RunOptions{Env: map[string]string{"GREETING": "hi", "APP_MODE": "x"}})
	if err != nil || res.Stdout != "hi x\n" {
		t.Fatalf("allowed names: %v, %+v", err, res)
	}
	_, err = p.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: map[string]string{"OTHER": "1"}})
	if err == nil || err.Error() != `environment variable "OTHER" is not allowed (allowed: GREETING, APP_*)` {
		t.Errorf("unlisted name: err = %v", err)
	}

	any := mustNew(t, Config{Root: dir, AllowCmds: []string{"sh"}, AllowEnv: []string{"*"}})
	for _, name := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "GCONV_PATH", "BASH_ENV", "ENV",
		"PYTHONSTARTUP", "PERL5OPT", "NODE_OPTIONS", "GIT_SSH_COMMAND", "GIT_CONFIG_GLOBAL", "PATH", "HOME", "BASH_FUNC_x%%",
		"GLIBC_TUNABLES", "RUBYOPT", "JAVA_TOOL_OPTIONS", "GOFLAGS", "PAGER"} {
		_, err := any.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: map[string]string{name: "./evil.so"}})
		if err == nil || !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), fmt.Sprintf("environment variable %q is never allowed", name)) {
			t.Errorf("%s with AllowEnv *: err = %v", name, err)
		}
	}
	// * is an allowlist of names known to be safe, not "anything but the
	// names known to be dangerous": the code-loading variables that
	// passed * before (OPENSSL_CONF made an allowlisted curl load a
	// library the script wrote) are refused, and so is any name * does
	// not know, until it is named
	for _, name := range []string{"OPENSSL_CONF", "DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER_PATH", "EXINIT", "VIMINIT",
		"PKG_CONFIG", "KRB5_CONFIG", "GEM_PATH", "PYTHONWARNINGS", "JAVA_HOME", "HTTPS_PROXY", "PERL_MM_OPT"} {
		_, err := any.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: map[string]string{name: "./evil.so"}})
		if err == nil || !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), fmt.Sprintf("environment variable %q is never allowed", name)) {
			t.Errorf("%s with AllowEnv *: err = %v", name, err)
		}
		if _, err := New(Config{Root: dir, AllowEnv: []string{name}}); err == nil {
			t.Errorf("AllowEnv %q accepted", name)
		}
	}
	for _, name := range []string{"GREETING", "LESSSECURE", "SOME_TOOL_PLUGIN", "_API_KEY"} {
		_, err := any.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: map[string]string{name: "x"}})
		want := fmt.Sprintf("environment variable %q is not allowed (allowed: *; * allows only names known to be safe, such as LANG, TZ, NO_COLOR and *_API_KEY: name it with --allow-env %s)", name, name)
		if err == nil || !errors.Is(err, ErrNotAllowed) || err.Error() != want {
			t.Errorf("%s with AllowEnv *: err = %v", name, err)
		}
	}
	for _, name := range []string{"LANG", "LC_ALL", "TZ", "NO_COLOR", "OPENAI_API_KEY", "GITHUB_TOKEN", "CI"} {
		if _, err := any.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: map[string]string{name: "x"}}); err != nil {
			t.Errorf("AllowEnv * refused the safe name %s: %v", name, err)
		}
	}
	named := mustNew(t, Config{Root: dir, AllowCmds: []string{"sh"}, AllowEnv: []string{"*", "GREETING"}})
	if _, err := named.Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{Env: map[string]string{"GREETING": "hi"}}); err != nil {
		t.Errorf("AllowEnv *, GREETING refused GREETING: %v", err)
	}
	for _, bad := range []string{"LD_PRELOAD", "LD_*", "GIT_*", "", "A=B", "A*B", "*X"} {
		if _, err := New(Config{Root: dir, AllowEnv: []string{bad}}); err == nil {
			t.Errorf("AllowEnv %q accepted", bad)
		}
	}
}

// TestAllowedNameInsideTheWorkspace: with .venv/bin on PATH and "pytest"
// allowed, the model wrote .venv/bin/pytest (write_file keeps the exec
// bit) and run_command(["pytest"]) ran it. A name PATH resolves into the
// writable workspace now runs only when allowed by its path.
func TestAllowedNameInsideTheWorkspace(t *testing.T) {
	needBins(t, "sh")
	dir := tempDir(t)
	bin := filepath.Join(dir, ".venv", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "pytest"), []byte("#!/bin/sh\necho owned\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	p := mustNew(t, Config{Root: dir, AllowCmds: []string{"pytest"}})
	_, err := p.Run(context.Background(), []string{"pytest"}, RunOptions{})
	want := fmt.Sprintf("command \"pytest\" resolves in PATH to %s, inside the writable workspace, where a script or the model can rewrite it; to run it, allow it by its path: --allow-cmd ./.venv/bin/pytest", filepath.Join(p.Root(), ".venv", "bin", "pytest"))
	if err == nil || !errors.Is(err, ErrNotAllowed) || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	named := mustNew(t, Config{Root: dir, AllowCmds: []string{"pytest", "./.venv/bin/pytest"}})
	res, err := named.Run(context.Background(), []string{"pytest"}, RunOptions{})
	if err != nil || res.Stdout != "owned\n" {
		t.Fatalf("allowed by its path: %v %+v", err, res)
	}
	// a command outside the workspace is unaffected
	if _, err := mustNew(t, Config{Root: dir, AllowCmds: []string{"sh"}}).Run(context.Background(), []string{"sh", "-c", "true"}, RunOptions{}); err != nil {
		t.Fatal(err)
	}
}
