package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// echoHandler stores the prompt and a reply, or blocks until cancelled
// when the prompt is "block".
type echoHandler struct{ store *sessions.Store }

func (h echoHandler) Handle(ctx context.Context, id, text string) error {
	if _, err := h.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: text}}}); err != nil {
		return err
	}
	if text == "block" {
		<-ctx.Done()
		return ctx.Err()
	}
	if text == "fail" {
		return fmt.Errorf("the handler failed")
	}
	_, err := h.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: "echo: " + text}}})
	return err
}

// peer is a raw JSON-RPC client of an in-process Serve.
type peer struct {
	t    *testing.T
	in   io.WriteCloser
	out  *bufio.Scanner
	done chan error
}

func startAgent(t *testing.T) (*peer, *sessions.Store) {
	t.Helper()
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &peer{t: t, in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	n := 0
	go func() {
		p.done <- Serve(context.Background(), AgentConfig{Store: store, Handler: echoHandler{store}, Name: "echo", Version: "test",
			NewID: func() string { n++; return fmt.Sprint("s", n) }}, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		select {
		case err := <-p.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after its input closed")
		}
	})
	return p, store
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// message is any JSON-RPC message the agent sends.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// next reads the agent's next message.
func (p *peer) next() rpcMessage {
	p.t.Helper()
	if !p.out.Scan() {
		p.t.Fatalf("the agent closed its output: %v", p.out.Err())
	}
	var m rpcMessage
	if err := json.Unmarshal(p.out.Bytes(), &m); err != nil {
		p.t.Fatalf("the agent sent %q: %v", p.out.Text(), err)
	}
	return m
}

// response reads messages until the response, returning it and the
// notifications before it.
func (p *peer) response() (rpcMessage, []rpcMessage) {
	p.t.Helper()
	var notes []rpcMessage
	for {
		m := p.next()
		if m.Method == "" {
			return m, notes
		}
		notes = append(notes, m)
	}
}

// TestMalformedAndOutOfOrder sends what a broken client might: every
// line gets a JSON-RPC error with the right code and id, and the agent
// goes on serving.
func TestMalformedAndOutOfOrder(t *testing.T) {
	p, _ := startAgent(t)
	cases := []struct {
		line string
		id   string
		code int
		msg  string
	}{
		{`this is not json`, "null", -32700, "Parse error"},
		{`{"jsonrpc":"2.0","id":1,"method":`, "null", -32700, "Parse error"},
		{`[{"jsonrpc":"2.0","id":1,"method":"initialize"}]`, "null", -32600, "Invalid request"},
		{`"a string"`, "null", -32600, "Invalid request"},
		{`{"jsonrpc":"1.0","id":2,"method":"initialize","params":{"protocolVersion":1}}`, "2", -32600, "Invalid request"},
		{`{"id":3,"method":"initialize","params":{"protocolVersion":1}}`, "3", -32600, "Invalid request"},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"initialize"}`, "null", -32600, "Invalid request"},
		{`{"jsonrpc":"2.0","id":4,"method":42}`, "4", -32600, "Invalid request"},
		{`{"jsonrpc":"2.0","id":5,"method":"initialize","params":"x"}`, "5", -32600, "Invalid request"},
		{`{"jsonrpc":"2.0","id":6}`, "6", -32600, "Invalid request"},
		{`{"jsonrpc":"2.0","id":7,"method":"no/such/method","params":{}}`, "7", -32601, "Method not found"},
		{`{"jsonrpc":"2.0","id":8,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`, "8", -32600, "session/new: the connection is not initialized"},
		{`{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}`, "9", -32600, "session/prompt: the connection is not initialized"},
		{`{"jsonrpc":"2.0","id":10,"method":"initialize","params":{"protocolVersion":"one"}}`, "10", -32602, "Invalid params"},
	}
	for _, c := range cases {
		p.send(c.line)
		m := p.next()
		if string(m.ID) != c.id || m.Error == nil || m.Error.Code != c.code || !strings.HasPrefix(m.Error.Message, c.msg) {
			t.Errorf("%s\ngot id %s error %+v, want id %s code %d %q", c.line, m.ID, m.Error, c.id, c.code, c.msg)
		}
	}
	// A notification of an unknown method gets no answer (nothing to
	// answer); the next request is answered.
	p.send(`{"jsonrpc":"2.0","method":"no/such/notification","params":{}}`)
	p.send(`{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":1}}`)
	if m := p.next(); string(m.ID) != "11" || m.Error != nil {
		t.Fatalf("initialize: %+v", m)
	}
	after := []struct {
		line string
		code int
		msg  string
	}{
		{`{"jsonrpc":"2.0","id":12,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}`, -32602, "session/new: cwd must be an absolute path"},
		{`{"jsonrpc":"2.0","id":13,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}}`, -32002, "session/prompt: unknown session id 'nope'"},
		{`{"jsonrpc":"2.0","id":14,"method":"session/load","params":{"sessionId":"nope","cwd":"/tmp","mcpServers":[]}}`, -32002, "session/load: unknown session id 'nope'"},
		{`{"jsonrpc":"2.0","id":15,"method":"session/set_mode","params":{"sessionId":"nope","modeId":"x"}}`, -32601, "Method not found"},
	}
	for _, c := range after {
		p.send(c.line)
		m, _ := p.response()
		if m.Error == nil || m.Error.Code != c.code || !strings.HasPrefix(m.Error.Message, c.msg) {
			t.Errorf("%s\ngot %+v, want code %d %q", c.line, m.Error, c.code, c.msg)
		}
	}
	p.send(`{"jsonrpc":"2.0","id":16,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	if m, _ := p.response(); m.Error != nil || !strings.Contains(string(m.Result), `"sessionId":"s1"`) {
		t.Fatalf("session/new after the errors: %+v %s", m.Error, m.Result)
	}
}

// TestPromptWhileRunning refuses a second prompt to a session with one
// running, cancels the first with session/cancel (stop reason
// cancelled, session active again) and reports a failed turn as an
// error.
func TestPromptWhileRunning(t *testing.T) {
	p, store := startAgent(t)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	p.response()
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	p.response()
	p.send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"block"}]}}`)
	// The first prompt is running once its user message is stored.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, _ := store.Length(context.Background(), "s1"); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first prompt did not start")
		}
	}
	p.send(`{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"again"}]}}`)
	if m, _ := p.response(); string(m.ID) != "4" || m.Error == nil || m.Error.Code != -32600 || !strings.Contains(m.Error.Message, "has a prompt running") {
		t.Fatalf("second prompt: %s %s %+v", m.ID, m.Result, m.Error)
	}
	p.send(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}`)
	if m, _ := p.response(); string(m.ID) != "3" || string(m.Result) != `{"stopReason":"cancelled"}` {
		t.Fatalf("cancelled prompt: %s %s %+v", m.ID, m.Result, m.Error)
	}
	rec, err := store.Meta(context.Background(), "s1")
	if err != nil || rec.Status != sessions.StatusActive {
		t.Fatalf("after the cancel: %v %v", rec.Status, err)
	}
	p.send(`{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"fail"}]}}`)
	if m, _ := p.response(); m.Error == nil || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "session/prompt: the turn failed: the handler failed") {
		t.Fatalf("failed turn: %s %+v", m.Result, m.Error)
	}
	p.send(`{"jsonrpc":"2.0","id":6,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"},{"type":"resource_link","name":"main.go","uri":"file:///tmp/main.go"}]}}`)
	m, notes := p.response()
	if string(m.Result) != `{"stopReason":"end_turn"}` || len(notes) != 1 || !strings.Contains(string(notes[0].Params), `"echo: hi\n\n[main.go](file:///tmp/main.go)"`) {
		t.Fatalf("prompt: %s %+v %v", m.Result, m.Error, notes)
	}
}

// permHandler starts a tool call as the agent loop does (a
// tool_executing state event naming the session and the call, then the
// approval callback on the same goroutine) and stores what the callback
// decided.
type permHandler struct {
	store *sessions.Store
	perms *Permissions
}

func (h permHandler) Handle(ctx context.Context, id, text string) error {
	if _, err := h.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: text}}}); err != nil {
		return err
	}
	h.store.Publish(sessions.Event{Type: "session_state", SessionID: id, CorrID: "call-" + text, Data: map[string]any{"state": "tool_executing", "tool": "run_command"}})
	ok, err := h.perms.Approve("run_command", map[string]any{"command": text})
	if err != nil {
		return err
	}
	_, err = h.store.Apply(ctx, id, &sessions.Change{Append: []message.Message{{Role: message.RoleAssistant, Text: fmt.Sprint("approved: ", ok)}}})
	return err
}

// TestPermissions asks the client with session/request_permission about
// the call the turn announced; "always" is remembered for the tool in
// the session, a rejection refuses.
func TestPermissions(t *testing.T) {
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		t.Fatal(err)
	}
	perms := NewPermissions()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &peer{t: t, in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	go func() {
		p.done <- Serve(context.Background(), AgentConfig{Store: store, Handler: permHandler{store, perms}, Permissions: perms,
			NewID: func() string { return "s1" }}, inR, outW)
		outW.Close()
	}()
	defer func() { inW.Close(); <-p.done }()
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	p.response()
	p.send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	p.response()

	// ask answers the permission request of the next prompt with option
	// (or a cancelled outcome when option is ""), and returns the reply.
	ask := func(id int, prompt, option string) string {
		t.Helper()
		p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":%q}]}}`, id, prompt))
		var reply string
		for {
			m := p.next()
			switch {
			case m.Method == "session/request_permission":
				var req struct {
					SessionID string `json:"sessionId"`
					ToolCall  struct {
						ToolCallID string         `json:"toolCallId"`
						Title      string         `json:"title"`
						RawInput   map[string]any `json:"rawInput"`
					} `json:"toolCall"`
					Options []struct{ OptionID, Kind string } `json:"options"`
				}
				json.Unmarshal(m.Params, &req)
				if req.SessionID != "s1" || req.ToolCall.ToolCallID != "call-"+prompt || req.ToolCall.Title != "run_command" || req.ToolCall.RawInput["command"] != prompt || len(req.Options) != 3 {
					t.Errorf("permission request %s", m.Params)
				}
				outcome := `{"outcome":"cancelled"}`
				if option != "" {
					outcome = `{"outcome":"selected","optionId":"` + option + `"}`
				}
				p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"outcome":%s}}`, m.ID, outcome))
			case m.Method == "session/update":
				reply += string(m.Params)
			case string(m.ID) == fmt.Sprint(id):
				return reply
			}
		}
	}
	for _, c := range []struct {
		prompt, option string
		want           string
	}{
		{"ls", "allow", "approved: true"},
		{"rm", "reject", "approved: false"},
		{"mv", "", "approved: false"},
		{"cp", "allow_always", "approved: true"},
		{"du", "never asked", "approved: true"},
	} {
		if got := ask(len(c.prompt)+int(c.prompt[0]), c.prompt, c.option); !strings.Contains(got, c.want) {
			t.Errorf("%s answered %q: reply %s, want %q", c.prompt, c.option, got, c.want)
		}
	}
}
