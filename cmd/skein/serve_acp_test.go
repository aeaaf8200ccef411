package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/nodetest"
)

// acpFrame is one SSE frame of a session's events: a stored event (seq
// > 0) or a transient one.
type acpFrame struct {
	seq        int64
	typ, role  string
	text, stop string
}

// acpFrames streams the session's SSE frames, from the start.
func (p *serveProcess) acpFrames(id string) <-chan acpFrame {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", p.url+"/api/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		p.t.Fatalf("events: %v %v", err, resp)
	}
	out := make(chan acpFrame, 1000)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var f acpFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				f.seq, _ = strconv.ParseInt(line[4:], 10, 64)
			case strings.HasPrefix(line, "data: "):
				var m map[string]any
				json.Unmarshal([]byte(line[6:]), &m)
				f.typ, _ = m["type"].(string)
				f.role, _ = m["role"].(string)
				f.text, _ = m["text"].(string)
				f.stop, _ = m["stop_reason"].(string)
			case line == "" && f.typ != "":
				out <- f
				f = acpFrame{}
			}
		}
	}()
	return out
}

// untilTurnEnd reads frames until the external agent's turn ends,
// checking that stored events follow each other from after on; it
// returns the frames and the last seq.
func untilTurnEnd(t *testing.T, frames <-chan acpFrame, after int64) ([]acpFrame, int64) {
	t.Helper()
	var got []acpFrame
	timeout := time.After(time.Minute)
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				t.Fatalf("the stream ended after %v", got)
			}
			if f.seq > 0 {
				if f.seq != after+1 {
					t.Fatalf("event seq %d after %d: a gap or a duplicate (%v)", f.seq, after, got)
				}
				after = f.seq
			}
			got = append(got, f)
			if f.typ == "acp_turn_end" {
				return got, after
			}
		case <-timeout:
			t.Fatalf("the turn did not end within a minute: %v", got)
		}
	}
}

// waitFor polls fn until it is true, failing after a minute.
func waitFor(t *testing.T, what string, fn func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !fn(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// waitIdle waits until no turn of session id runs (the turn's last
// event is stored a moment before the turn has ended).
func (p *serveProcess) waitIdle(id string) {
	p.t.Helper()
	waitFor(p.t, "the turn to end", func() bool { return p.call("GET", "/api/sessions/"+id, "", 200)["running"] == false })
}

// pids lists the pids of the test agent's processes that started.
func agentPids(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		n, _ := strconv.Atoi(e.Name())
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// messages returns the session's messages.
func (p *serveProcess) messages(id string) []map[string]any {
	p.t.Helper()
	var out []map[string]any
	for _, m := range p.call("GET", "/api/sessions/"+id, "", 200)["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// shape is a message as role (! for an error result), tool call ids and
// content, for comparisons.
func shape(m map[string]any) string {
	s := m["role"].(string)
	if m["isError"] == true {
		s += "!"
	}
	if id, ok := m["toolCallId"].(string); ok {
		s += "(" + id + ")"
	}
	if calls, ok := m["toolCalls"].([]any); ok {
		var ids []string
		for _, c := range calls {
			ids = append(ids, c.(map[string]any)["id"].(string))
		}
		s += "[" + strings.Join(ids, ",") + "]"
	}
	content, _ := m["content"].(string)
	return s + " " + content
}

// startACPServe starts skein serve with the test ACP agent (written with
// the official TypeScript SDK) as agent "tester", and returns it and the
// directory where the agent's processes write their pids, and its
// working directory (its store is sessions.db there).
func startACPServe(t *testing.T, extra ...string) (p *serveProcess, pids, dir string) {
	node := nodetest.Require(t, acpNodeDir)
	agent, _ := filepath.Abs(filepath.Join(acpNodeDir, "agent.mjs"))
	dir = t.TempDir()
	pids = filepath.Join(dir, "pids")
	if err := os.Mkdir(pids, 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--allow-cmd", node, "--agent", "acp:tester=" + shellQuote(node) + " " + shellQuote(agent) + " " + shellQuote(pids)}, extra...)
	return startServe(t, dir, args...), pids, dir
}

// TestServeExternalACPAgent serves an ACP agent written with the
// official TypeScript SDK through skein serve: its streamed replies and
// tool calls are stored as messages (chunks joined into one assistant
// message, each tool call with its result) and streamed over SSE, with
// nothing lost or duplicated; a cancelled turn is healed; killing the
// process or its crash mid-turn sets the session to error with the exit
// and the tail of its stderr; DELETE stops the process.
func TestServeExternalACPAgent(t *testing.T) {
	p, pids, dir := startACPServe(t)
	id := p.call("POST", "/api/sessions", `{"agent":"tester"}`, 201)["id"].(string)
	if got := agentPids(t, pids); len(got) != 1 {
		t.Fatalf("agent processes after the create: %v, want one", got)
	}
	frames := p.acpFrames(id)

	// A streamed reply: text deltas live, one assistant message stored.
	p.call("POST", "/api/sessions/"+id+"/prompt", `{"text":"hello there"}`, 202)
	got, last := untilTurnEnd(t, frames, 0)
	p.waitIdle(id)
	var deltas strings.Builder
	var stored []string
	for _, f := range got {
		switch {
		case f.typ == "text_delta":
			deltas.WriteString(f.text)
		case f.typ == "message":
			stored = append(stored, f.role)
		case f.typ == "acp_turn_end" && f.stop != "end_turn":
			t.Errorf("stop reason %q", f.stop)
		}
	}
	if deltas.String() != "Hello, world." || strings.Join(stored, " ") != "user assistant" {
		t.Errorf("SSE: deltas %q, messages %v", deltas.String(), stored)
	}

	// Tool calls: one completes, one fails, then the answer.
	p.call("POST", "/api/sessions/"+id+"/prompt", `{"text":"tool please"}`, 202)
	untilTurnEnd(t, frames, last)
	p.waitIdle(id)
	var shapes []string
	for _, m := range p.messages(id) {
		shapes = append(shapes, shape(m))
	}
	want := []string{
		"user hello there",
		"assistant Hello, world.",
		"user tool please",
		"assistant[call-1] Let me look.",
		"tool(call-1) the notes say hi",
		"assistant[call-2] ",
		"tool!(call-2) make: no rule",
		"assistant The notes say hi; the tests did not run.",
	}
	if strings.Join(shapes, "\n") != strings.Join(want, "\n") {
		t.Errorf("stored messages:\n%s\nwant:\n%s", strings.Join(shapes, "\n"), strings.Join(want, "\n"))
	}

	// A permission request is refused, and the refusal logged.
	p.call("POST", "/api/sessions/"+id+"/prompt", `{"text":"ask first"}`, 202)
	p.waitIdle(id)
	msgs := p.messages(id)
	if s := shape(msgs[len(msgs)-1]); s != "tool!(call-ask) permission: no" {
		t.Errorf("after the permission request the last message is %q", s)
	}
	exported, err := exec.Command(skeinBinary(t), "sessions", "export", id, "--store", filepath.Join(dir, "sessions.db"), "--format", "json").Output()
	if err != nil || !strings.Contains(string(exported), `"rule": "acp permission"`) {
		t.Errorf("no security_decision event for the refused permission: %v", err)
	}

	// Cancel mid-tool: the agent gets session/cancel, the call is healed,
	// the session stays active.
	p.call("POST", "/api/sessions/"+id+"/prompt", `{"text":"slow please"}`, 202)
	p.waitToolCall(id)
	p.call("POST", "/api/sessions/"+id+"/cancel", "", 202)
	p.waitIdle(id)
	msgs = p.messages(id)
	if s := shape(msgs[len(msgs)-1]); s != "tool!(call-slow) cancelled" {
		t.Errorf("after the cancel the last message is %q", s)
	}
	if st := p.call("GET", "/api/sessions/"+id, "", 200)["status"]; st != "active" {
		t.Errorf("after the cancel the session is %v", st)
	}

	// Killed between turns: the session is error, with the signal and
	// the tail of the agent's stderr.
	pid := agentPids(t, pids)[0] // the only one
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "the session to fail", func() bool { return p.call("GET", "/api/sessions/"+id, "", 200)["status"] == "error" })
	msgs = p.messages(id)
	note, _ := msgs[len(msgs)-1]["content"].(string)
	if msgs[len(msgs)-1]["role"] != "system" || !strings.Contains(note, "signal: killed") || !strings.Contains(note, "test agent "+strconv.Itoa(pid)+" ready") {
		t.Errorf("after the kill the last message is %q", note)
	}
	// A new prompt reactivates it on a new process of the agent.
	p.call("POST", "/api/sessions/"+id+"/prompt", `{"text":"hello again"}`, 202)
	p.waitIdle(id)
	msgs = p.messages(id)
	if s := shape(msgs[len(msgs)-1]); s != "assistant Hello, world." || len(agentPids(t, pids)) != 2 {
		t.Errorf("after the restart: last message %q, agent processes %v", s, agentPids(t, pids))
	}

	// A turn the agent ends with max_turn_requests.
	p.call("POST", "/api/sessions/"+id+"/prompt", `{"text":"limit please"}`, 202)
	p.waitIdle(id)

	// A crash mid-turn: error, with the exit status and the stderr tail;
	// the text streamed before the crash is kept.
	id2 := p.call("POST", "/api/sessions", `{"agent":"tester"}`, 201)["id"].(string)
	p.call("POST", "/api/sessions/"+id2+"/prompt", `{"text":"crash now"}`, 202)
	waitFor(t, "the crashed session to fail", func() bool { return p.call("GET", "/api/sessions/"+id2, "", 200)["status"] == "error" })

	// Every turn ended with the session spec's session:turn_completed,
	// after the agent's own acp_turn_end when it answered; each session
	// started with session:started.
	for sid, want := range map[string]string{
		id:  "session:started; end_turn; end_turn; end_turn; cancelled; end_turn; error turn_limit",
		id2: "session:started; error failed",
	} {
		if got := lifecycle(t, dir, sid); got != want {
			t.Errorf("session %s's lifecycle events: %s, want %s", sid, got, want)
		}
	}
	shapes = nil
	for _, m := range p.messages(id2) {
		shapes = append(shapes, shape(m))
	}
	if len(shapes) != 3 || shapes[1] != "assistant About to fail" || !strings.Contains(shapes[2], "exit status 3") || !strings.Contains(shapes[2], "fatal: out of cheese") {
		t.Errorf("after the crash:\n%s", strings.Join(shapes, "\n"))
	}

	// DELETE stops the session's process.
	before := agentPids(t, pids)
	id3 := p.call("POST", "/api/sessions", `{"agent":"tester"}`, 201)["id"].(string)
	all := agentPids(t, pids)
	pid3 := 0
	for _, pid := range all {
		if !slices.Contains(before, pid) {
			pid3 = pid // pids wrap around: the new one need not be the largest
		}
	}
	if len(all) != 4 || !alive(pid3) {
		t.Fatalf("agent processes %v (before the create: %v), want a fourth one running", all, before)
	}
	if st := p.call("DELETE", "/api/sessions/"+id3, "", 200)["status"]; st != "cancelled" {
		t.Errorf("deleted session is %v", st)
	}
	waitFor(t, "the deleted session's process to exit", func() bool { return !alive(pid3) })
}

// lifecycle lists session id's session:started and the stopReason (and
// error code) of each session:turn_completed, from an export of the
// store in dir, checking that an answered turn's acp_turn_end comes just
// before its session:turn_completed.
func lifecycle(t *testing.T, dir, id string) string {
	t.Helper()
	out, err := exec.Command(skeinBinary(t), "sessions", "export", id, "--store", filepath.Join(dir, "sessions.db"), "--format", "json").Output()
	if err != nil {
		t.Fatalf("export %s: %v", id, err)
	}
	var rec struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatalf("export %s: %v", id, err)
	}
	var got []string
	prev := ""
	for _, e := range rec.Events {
		switch e["type"] {
		case "session:started":
			got = append(got, "session:started")
		case "session:turn_completed":
			s, _ := e["stopReason"].(string)
			if errv, ok := e["error"].(map[string]any); ok {
				s += " " + fmt.Sprint(errv["code"])
			}
			if answered := s == "end_turn" || strings.HasSuffix(s, "turn_limit"); answered && prev != "acp_turn_end" {
				t.Errorf("session %s: %s follows %s, not acp_turn_end", id, s, prev)
			}
			got = append(got, s)
		}
		prev, _ = e["type"].(string)
	}
	return strings.Join(got, "; ")
}

// TestServeExternalACPAgentShared runs two sessions on one process of the
// agent (--acp-shared); the one bound to a repository gets it as its
// session/new cwd.
func TestServeExternalACPAgentShared(t *testing.T) {
	p, pids, dir := startACPServe(t, "--acp-shared")
	if err := os.Mkdir(filepath.Join(dir, "repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	p.call("POST", "/api/repos", `{"id":"r","path":"repo"}`, 201)
	a := p.call("POST", "/api/sessions", `{"agent":"tester"}`, 201)["id"].(string)
	b := p.call("POST", "/api/sessions", `{"agent":"tester","repoId":"r"}`, 201)["id"].(string)
	root, _ := filepath.EvalSymlinks(dir)
	for id, want := range map[string]string{a: root, b: filepath.Join(root, "repo")} {
		acpMeta, _ := p.call("GET", "/api/sessions/"+id, "", 200)["metadata"].(map[string]any)["acp"].(map[string]any)
		if acpMeta["cwd"] != want {
			t.Errorf("session %s: acp metadata %v, want cwd %s", id, acpMeta, want)
		}
	}
	for _, id := range []string{a, b} {
		p.call("POST", "/api/sessions/"+id+"/prompt", `{"text":"echo `+id+`"}`, 202)
	}
	for _, id := range []string{a, b} {
		p.waitIdle(id)
		if s := shape(p.messages(id)[1]); s != "assistant You said: echo "+id {
			t.Errorf("session %s got %q", id, s)
		}
	}
	if got := agentPids(t, pids); len(got) != 1 {
		t.Errorf("agent processes %v, want one shared", got)
	}
}

// TestServeExternalACPAgentAllowlist refuses to start with an agent
// command that --allow-cmd does not allow.
func TestServeExternalACPAgentAllowlist(t *testing.T) {
	cmd := exec.Command(skeinBinary(t), "serve", "--store", "memory", "--addr", "127.0.0.1:0", "--agent", "acp:x=node agent.mjs")
	cmd.Env = append(os.Environ(), "SKEIN_SERVE_TOKEN=tok")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), `command "node" is not allowed`) {
		t.Fatalf("exit %v, output %s", err, out)
	}
	for _, bad := range []string{"acp:x", "acp:=node", "acp:x=", "acp:x='node"} {
		out, err := exec.Command(skeinBinary(t), "serve", "--store", "memory", "--agent", bad).CombinedOutput()
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--agent "+bad) {
			t.Errorf("--agent %s: exit %v, output %s", bad, err, out)
		}
	}
}

func TestSplitCommandLine(t *testing.T) {
	for in, want := range map[string][]string{
		`node agent.mjs`:                   {"node", "agent.mjs"},
		`  a   'b c'  "d \"e\" \\ $" f\ g`: {"a", "b c", `d "e" \ $`, "f g"},
		`x '' ""`:                          {"x", "", ""},
		`a,b c`:                            {"a,b", "c"},
	} {
		got, err := splitCommandLine(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("splitCommandLine(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`'open`, `"open`, `trailing\`} {
		if _, err := splitCommandLine(bad); err == nil {
			t.Errorf("splitCommandLine(%q): no error", bad)
		}
	}
}
