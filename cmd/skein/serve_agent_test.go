package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// TestServeAgentFile serves an agent file with no .star: a session made
// with a context is bound to the agent, its turns run the agent's model
// and assembled system prompt (the skill listed, the context filled), and
// a bad context is refused with nothing stored.
func TestServeAgentFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"helper.agent.yaml":     "description: Helps\nmodel: mock/helper\nsystem: You help in {{ctx.workingDir}} for {{ctx.variables.team}}.\nskills: [skills]\n",
		"skills/style/SKILL.md": "---\nname: style\ndescription: The house style\n---\nShort functions.\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := startServe(t, dir, "--agent", "helper.agent.yaml")
	p.call("POST", "/api/sessions", `{"id": "a1", "agent": "helper", "context": {"workingDir": "skills", "variables": {"team": "core"}}}`, 201)
	p.call("POST", "/api/sessions", `{"id": "a2", "agent": "helper", "context": {"workingDir": "/"}}`, 400)
	p.call("POST", "/api/sessions", `{"id": "a3", "agent": "slow", "context": {"workingDir": "skills"}}`, 400)
	p.call("POST", "/api/sessions/a1/prompt", `{"text": "hello"}`, 202)
	b := stopAfterTurns(t, p, dir, "a1")
	rec, err := b.Load(context.Background(), "a1")
	if err != nil {
		t.Fatal(err)
	}
	if snap, _ := rec.Metadata["agent_snapshot"].(map[string]any); snap["name"] != "helper" || rec.Metadata["agent"] != "helper" {
		t.Errorf("metadata %v", rec.Metadata)
	}
	var system string
	var started bool
	for _, e := range rec.Events {
		switch e.Type {
		case "turn_start":
			system, _ = e.Data["system"].(string)
		case "session:started":
			started = true
		}
	}
	want := "You help in skills for core.\n\n## Skills\n\nLoad a skill's instructions with the load_skill tool when the task needs it:\n\n- style: The house style\n\n## Context\n\n- Working directory: skills"
	if system != want || !started {
		t.Errorf("system prompt sent %q (session:started %v), want %q", system, started, want)
	}
	if m := rec.Messages[1]; m.Model != "helper" || !strings.HasPrefix(m.TextContent(), "Mock response") {
		t.Errorf("reply %+v", m)
	}
	for _, id := range []string{"a2", "a3"} {
		if _, err := b.Load(context.Background(), id); err == nil || !strings.Contains(err.Error(), sessions.ErrNotFound.Error()) {
			t.Errorf("refused session %s: %v", id, err)
		}
	}
}

// TestServeAgentFileRepo: a session of an agent file created with a
// repoId works in the repository: its context's workingDir is the
// repository (the system prompt says so), a workingDir given with it is
// relative to the repository and may not leave it.
func TestServeAgentFileRepo(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"repos/api/src", "repos/web"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	if err := os.WriteFile(filepath.Join(dir, "helper.agent.yaml"), []byte("model: mock/helper\nsystem: You work in {{ctx.workingDir}}.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, dir, "--agent", "helper.agent.yaml", "--workspace-root", "repos", "--repo", "api=repos/api")
	p.call("POST", "/api/repos", `{"id": "web", "path": "web"}`, 201)
	p.call("POST", "/api/sessions", `{"id": "r1", "agent": "helper", "repoId": "api"}`, 201)
	p.call("POST", "/api/sessions", `{"id": "r2", "agent": "helper", "repoId": "api", "context": {"workingDir": "src"}}`, 201)
	p.call("POST", "/api/sessions", `{"id": "r3", "agent": "helper", "repoId": "api", "context": {"workingDir": "../web"}}`, 400)
	p.call("POST", "/api/sessions", `{"id": "r4", "agent": "helper", "repoId": "api", "context": {"workingDir": "`+filepath.Join(dir, "repos", "web")+`"}}`, 400)
	p.call("POST", "/api/sessions", `{"id": "r5", "agent": "helper", "repoId": "nope"}`, 404)
	for _, id := range []string{"r1", "r2"} {
		p.call("POST", "/api/sessions/"+id+"/prompt", `{"text": "hello"}`, 202)
	}
	b := stopAfterTurns(t, p, dir, "r1", "r2")
	for id, wd := range map[string]string{"r1": filepath.Join(dir, "repos", "api"), "r2": "src"} {
		rec, err := b.Load(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if c, _ := rec.Metadata["session_context"].(map[string]any); c["workingDir"] != wd || rec.Metadata["repoId"] != "api" {
			t.Errorf("session %s: metadata %v", id, rec.Metadata)
		}
		for _, e := range rec.Events {
			if e.Type == "turn_start" {
				if s, _ := e.Data["system"].(string); !strings.HasPrefix(s, "You work in "+wd+".") {
					t.Errorf("session %s: system prompt %q", id, s)
				}
			}
		}
	}
}

// stopAfterTurns waits until each session holds its prompt and the
// reply, stops the server and opens its store (closed when the test
// ends).
func stopAfterTurns(t *testing.T, p *serveProcess, dir string, ids ...string) *sqlite.Backend {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for _, id := range ids {
		for roles(p.call("GET", "/api/sessions/"+id+"/messages", "", 200)) != "user,assistant" {
			if time.Now().After(deadline) {
				t.Fatalf("the turn of %s did not finish", id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	p.cmd.Process.Kill()
	<-p.done
	b, err := sqlite.Open(filepath.Join(dir, "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
