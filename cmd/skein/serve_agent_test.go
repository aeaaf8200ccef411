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
	deadline := time.Now().Add(time.Minute)
	for roles(p.call("GET", "/api/sessions/a1/messages", "", 200)) != "user,assistant" {
		if time.Now().After(deadline) {
			t.Fatal("the turn did not finish")
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.cmd.Process.Kill()
	<-p.done

	b, err := sqlite.Open(filepath.Join(dir, "sessions.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
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
