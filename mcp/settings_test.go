package mcp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/mcp"
	"github.com/skein-dev/skein/workspace"
)

func TestParseSettings(t *testing.T) {
	secret := func(name string) (workspace.Secret, error) {
		if name == "TOKEN" {
			return workspace.NewSecret("TOKEN", "tok-value-1"), nil
		}
		return workspace.Secret{}, errors.New(`environment variable "` + name + `" is not set`)
	}
	spec, err := mcp.ParseSettings("fs", map[string]any{
		"command":   []any{"npx", "@modelcontextprotocol/server-filesystem", "."},
		"env":       map[string]any{"A": "b", "TOKEN": map[string]any{"secret": "TOKEN"}},
		"timeout_s": int64(5),
		"prefix":    "fs_",
	}, secret)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "fs" || len(spec.Command) != 3 || spec.Env["A"] != "b" || spec.SecretEnv["TOKEN"].Reveal() != "tok-value-1" || spec.Timeout != 5*time.Second || spec.Prefix != "fs_" {
		t.Errorf("spec %+v", spec)
	}
	for _, tt := range []struct {
		settings map[string]any
		want     string
	}{
		{map[string]any{"comand": []any{"x"}}, "mcp server 'fs': unknown key 'comand' (did you mean 'command'?); the keys are command, env, headers, prefix, timeout_s, url"},
		{map[string]any{"command": "npx x"}, "mcp server 'fs': 'command': got string, want a list of strings"},
		{map[string]any{"url": "http://x", "headers": map[string]any{"A": int64(1)}}, "mcp server 'fs': 'headers': 'A': got number, want a string or {secret: VAR}"},
		{map[string]any{"command": []any{"x"}, "env": map[string]any{"B": map[string]any{"secret": "NOPE"}}}, `mcp server 'fs': 'env': 'B': environment variable "NOPE" is not set`},
		{map[string]any{"command": []any{"x"}, "timeout_s": int64(0)}, "mcp server 'fs': 'timeout_s': must be > 0 and at most 1e9 seconds, got 0"},
		{map[string]any{}, "mcp server 'fs': give command (a stdio server) or url (a Streamable HTTP server)"},
	} {
		if _, err := mcp.ParseSettings("fs", tt.settings, secret); err == nil || err.Error() != tt.want {
			t.Errorf("%v: got %v, want %s", tt.settings, err, tt.want)
		}
	}
}

func TestPool(t *testing.T) {
	spec, p := testServer(t)
	var pool mcp.Pool
	a, err := pool.Connect(context.Background(), "k", spec, p)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pool.Connect(context.Background(), "k", spec, p)
	if err != nil || a != b {
		t.Fatalf("a second Connect for one key: %v, %v", b, err)
	}
	c, err := pool.Connect(context.Background(), "other", spec, p)
	if err != nil || c == a {
		t.Fatalf("another key: %v, %v", c, err)
	}
	if err := pool.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Call(context.Background(), "say", nil, nil); err == nil || !strings.Contains(err.Error(), "is closed") {
		t.Errorf("a call after the pool closed: %v", err)
	}
	if _, err := pool.Connect(context.Background(), "k", spec, p); err == nil {
		t.Error("Connect after Close succeeded")
	}
}
