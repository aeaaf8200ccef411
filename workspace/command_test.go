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
