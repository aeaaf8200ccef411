//go:build unix

package workspace

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestCommand checks a long-lived command as Run does (allowlist,
// environment) and leaves it to the caller to start; KillGroup stops
// it.
func TestCommand(t *testing.T) {
	needBins(t, "sleep")
	p := mustNew(t, Config{Root: tempDir(t), AllowCmds: []string{"sleep"}, AllowEnv: []string{"SKEIN_TEST_KEY"}})
	if _, err := p.Command([]string{"cat"}, RunOptions{}); err == nil || !strings.Contains(err.Error(), `command "cat" is not allowed (allowed: sleep)`) {
		t.Fatalf("cat: %v", err)
	}
	t.Setenv("SKEIN_TEST_KEY", "k1")
	t.Setenv("SKEIN_TEST_OTHER", "k2")
	env := p.AllowedEnviron()
	if env["SKEIN_TEST_KEY"] != "k1" || env["SKEIN_TEST_OTHER"] != "" || env["PATH"] != "" {
		t.Fatalf("AllowedEnviron = %v, want only SKEIN_TEST_KEY", env)
	}
	cmd, err := p.Command([]string{"sleep", "60"}, RunOptions{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cmd.Env, "SKEIN_TEST_KEY=k1") || slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "SKEIN_TEST_OTHER=") }) {
		t.Fatalf("environment %v", cmd.Env)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	KillGroup(cmd)
	var ee *exec.ExitError
	if err := cmd.Wait(); err == nil || !errors.As(err, &ee) {
		t.Fatalf("after KillGroup: %v", err)
	}
}

// TestCommandInherit: RunOptions.Inherit names the only variables taken
// from skein's environment; TerminateGroup stops the group with SIGTERM.
func TestCommandInherit(t *testing.T) {
	needBins(t, "sleep")
	p := mustNew(t, Config{Root: tempDir(t), AllowCmds: []string{"sleep"}, AllowEnv: []string{"GREETING"}})
	t.Setenv("LANG", "C.UTF-8")
	cmd, err := p.Command([]string{"sleep", "60"}, RunOptions{Inherit: []string{"PATH"}, Env: map[string]string{"GREETING": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range cmd.Env {
		if !strings.HasPrefix(kv, "PATH=") && kv != "GREETING=hi" {
			t.Errorf("the environment holds %s", kv)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	TerminateGroup(cmd)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("after TerminateGroup: %v", err)
	}
}

func TestCheckURL(t *testing.T) {
	p := mustNew(t, Config{Root: tempDir(t), AllowNet: []string{"example.com"}})
	if err := p.CheckURL("https://example.com/mcp"); err != nil {
		t.Error(err)
	}
	for url, want := range map[string]string{
		"https://other.com/mcp": `host "other.com" is not allowed (allowed: example.com)`,
		"ftp://example.com/":    `url scheme "ftp" is not allowed`,
		"/relative":             `invalid url "/relative": not absolute`,
	} {
		if err := p.CheckURL(url); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckURL(%q) = %v, want %s", url, err, want)
		}
	}
	if err := p.CheckURL("https://other.com/"); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("a refused host does not match ErrNotAllowed: %v", err)
	}
}
