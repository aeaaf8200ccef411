// Package mock is skein's deterministic model provider: scripts queue
// responses with llm_mock, and every request is logged for llm_mock_calls.
// It is what tests and CI use, and what --llm-replay fixtures load into.
//
// Queued entries answer calls for any provider. Entries without a match
// pattern are consumed first-in first-out; then entries with a match glob
// (against all message text of the request) are tried in order and reused
// unless ConsumeMatch. With nothing matching, the "mock" provider itself
// answers "Mock response to N-word prompt: <first 100 chars of the last
// user message>"; other providers fall through to the real one, except in
// replay mode, where a request with no fixture fails loudly. A text reply
// to a streaming request is delivered to Request.OnDelta in one piece, as
// a real provider would stream it.
package mock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// Name is the provider name of the mock.
const Name = "mock"

// Call is a tool call of a queued response; ids are assigned when the
// response is served (mock_call_1, mock_call_2, ... per response).
type Call struct {
	Name      string
	Arguments map[string]any
}

// Failure is a scripted error.
type Failure struct {
	Category   llm.Category
	Message    string
	RetryAfter time.Duration
}

// Response is one queued answer (the keys of llm_mock).
type Response struct {
	Text         string
	ToolCalls    []Call
	Match        string // glob over the request's message text; "" = FIFO
	ConsumeMatch bool
	Error        *Failure
	InputTokens  int // -1: estimated from the request
	OutputTokens int // -1: estimated from the reply
	Thinking     string
	Model        string
	// Delay makes the call wait this long (honouring cancellation) before
	// answering, to script slow models.
	Delay time.Duration
	// Recorded is what a fixture line says about the request it answered
	// (nil for llm_mock and lines without a `request`); Source is the
	// line, "file:N", for errors.
	Recorded *Recorded
	Source   string
}

// ReplayMode is how replay pairs requests with recorded entries.
type ReplayMode string

// Replay modes.
const (
	// ReplayStrict answers in order and checks each request against the
	// fingerprint its entry recorded (entries without one are not checked).
	ReplayStrict ReplayMode = "strict"
	// ReplayOrder answers in order and ignores the requests.
	ReplayOrder ReplayMode = "order"
)

// ReplayModes lists the modes, sorted.
var ReplayModes = []string{string(ReplayOrder), string(ReplayStrict)}

// Replay configures replay mode (see SetReplay).
type Replay struct {
	// Fixture is the fixture file, named in errors.
	Fixture string
	Mode    ReplayMode
	// Rerecord is the command that records the fixture again, shown when
	// a request does not match.
	Rerecord string
}

// Request is one logged request.
type Request struct {
	Provider string
	Req      *llm.Request
}

// Mock is one VM's queue and request log. It is safe for concurrent use.
type Mock struct {
	mu      sync.Mutex
	fifo    []Response
	matched []*matchEntry
	log     []Request
	replay  *Replay // nil: not replaying
	// parent, for a session queue (NewSessionQueue), answers what the
	// queue cannot and holds the replay settings.
	parent *Mock
}

type matchEntry struct {
	resp Response
	used bool
}

// New returns an empty mock.
func New() *Mock { return &Mock{} }

// Queue adds a response.
func (m *Mock) Queue(r Response) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Match == "" {
		m.fifo = append(m.fifo, r)
	} else {
		m.matched = append(m.matched, &matchEntry{resp: r})
	}
}

// SetReplay puts the mock in replay mode: requests that no queued
// response answers fail instead of reaching a provider, and in strict
// mode a request that differs from the one its entry recorded fails with
// a diff.
func (m *Mock) SetReplay(r Replay) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.Mode == "" {
		r.Mode = ReplayStrict
	}
	m.replay = &r
}

// Clear empties the queue and the log.
func (m *Mock) Clear() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fifo, m.matched, m.log = nil, nil, nil
}

// Calls returns the logged requests, oldest first.
func (m *Mock) Calls() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Request(nil), m.log...)
}

// Pending reports how many responses can still be served: FIFO entries
// plus match entries that are not consumed (a session queue's own, not
// its parent's).
func (m *Mock) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.fifo)
	for _, e := range m.matched {
		if !e.used {
			n++
		}
	}
	return n
}

// take returns the queued response for req, if any: from m, else from
// its parent.
func (m *Mock) take(req *llm.Request) (Response, bool) {
	if r, ok := m.takeOwn(req); ok || m.parent == nil {
		return r, ok
	}
	return m.parent.take(req)
}

// takeOwn returns the response m itself has queued for req, if any.
func (m *Mock) takeOwn(req *llm.Request) (Response, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.fifo) > 0 {
		r := m.fifo[0]
		m.fifo = m.fifo[1:]
		return r, true
	}
	if len(m.matched) == 0 {
		return Response{}, false
	}
	text := RequestText(req)
	for _, e := range m.matched {
		if e.used || !Glob(e.resp.Match, text) {
			continue
		}
		if e.resp.ConsumeMatch {
			e.used = true
		}
		return e.resp, true
	}
	return Response{}, false
}

// record logs a request and returns its number (1 for the first); a
// session queue's requests are logged in its parent's log too, which
// numbers them.
func (m *Mock) record(provider string, req *llm.Request) int {
	m.mu.Lock()
	m.log = append(m.log, Request{Provider: provider, Req: req})
	n := len(m.log)
	m.mu.Unlock()
	if m.parent != nil {
		return m.parent.record(provider, req)
	}
	return n
}

// replaying returns the replay settings (a session queue's are its
// parent's), nil when not replaying.
func (m *Mock) replaying() *Replay {
	for m.parent != nil {
		m = m.parent
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.replay
}

// checkRecorded fails when r recorded a request fingerprint that req,
// request number n, does not have: the pipeline drifted from its
// recording. The error shows what changed and how to record again.
func checkRecorded(replay *Replay, n int, req *llm.Request, r Response) error {
	if r.Recorded == nil || r.Recorded.Fingerprint == "" {
		return nil
	}
	shape := RequestShape(req)
	if Fingerprint(shape) == r.Recorded.Fingerprint {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "llm replay: request %d does not match the one recorded at %s:", n, r.Source)
	for _, d := range requestDiff(r.Recorded.Shape, shape) {
		b.WriteString("\n    " + d)
	}
	if replay.Rerecord != "" {
		b.WriteString("\n  record it again: " + replay.Rerecord)
	}
	b.WriteString("\n  or answer by order only, ignoring the requests: --llm-replay-mode order")
	return errors.New(b.String())
}

// Wrap returns the provider a call for providerName goes to: queued
// responses first, then real (nil when no real provider is configured;
// unconfigured is then the error). The mock provider itself is
// Wrap(Name, nil, nil).
func (m *Mock) Wrap(providerName string, real llm.Provider, unconfigured error) llm.Provider {
	return &wrapped{mock: m, name: providerName, real: real, unconfigured: unconfigured}
}

type wrapped struct {
	mock         *Mock
	name         string
	real         llm.Provider
	unconfigured error
}

func (w *wrapped) Name() string { return w.name }

func (w *wrapped) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m := w.mock.QueueOf(ctx)
	n := m.record(w.name, req)
	replay := m.replaying()
	if r, ok := m.take(req); ok {
		if replay != nil && replay.Mode == ReplayStrict {
			if err := checkRecorded(replay, n, req, r); err != nil {
				return nil, err
			}
		}
		return serve(ctx, w.name, req, r)
	}
	switch {
	case replay != nil:
		return nil, fmt.Errorf("llm replay: no fixture left in %s for the request starting %q", replay.Fixture, promptStart(req))
	case w.name == Name:
		return defaultReply(req), nil
	case w.real != nil:
		return w.real.Complete(ctx, req)
	case w.unconfigured != nil:
		return nil, w.unconfigured
	}
	return nil, fmt.Errorf("provider %q is not available", w.name)
}

// calls returns r's tool calls as a reply's, with their ids
// (mock_call_1, ...); nil when r has none, empty when r's list is empty.
func (r *Response) calls() []message.ToolCall {
	if r.ToolCalls == nil {
		return nil
	}
	out := make([]message.ToolCall, len(r.ToolCalls))
	for i, c := range r.ToolCalls {
		args := c.Arguments
		if args == nil {
			args = map[string]any{}
		}
		out[i] = message.ToolCall{ID: fmt.Sprintf("mock_call_%d", i+1), Name: c.Name, Arguments: jsonvalue.CloneObject(args)}
	}
	return out
}

// serve turns a queued response into the call's result.
func serve(ctx context.Context, provider string, req *llm.Request, r Response) (*llm.Response, error) {
	if r.Delay > 0 {
		if err := llm.SleepContext(ctx, r.Delay); err != nil {
			return nil, err
		}
	}
	if r.Error != nil {
		return nil, &llm.Error{Provider: provider, Category: r.Error.Category, Message: r.Error.Message, RetryAfter: r.Error.RetryAfter}
	}
	resp := &llm.Response{Text: r.Text, Model: r.Model, StopReason: llm.StopEnd}
	if resp.Model == "" {
		resp.Model = modelOf(req)
	}
	resp.ToolCalls = r.calls()
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = llm.StopToolUse
	}
	if r.Thinking != "" {
		resp.Thinking = []message.Block{{Type: message.BlockThinking, Thinking: r.Thinking, Signature: "mock-signature"}}
	}
	if req.Stream && req.OnDelta != nil && r.Text != "" {
		req.OnDelta(llm.Delta{Text: r.Text}) // like a real provider streaming, in one piece
	}
	resp.Usage.InputTokens = r.InputTokens
	if r.InputTokens < 0 {
		resp.Usage.InputTokens = requestTokens(req)
	}
	resp.Usage.OutputTokens = r.OutputTokens
	if r.OutputTokens < 0 {
		resp.Usage.OutputTokens = estimate(r.Text)
	}
	return resp, nil
}

// defaultReply answers when nothing is queued for the mock provider: a
// request for structured output gets a value its schema accepts
// (Example), any other the prompt's word count and start.
func defaultReply(req *llm.Request) *llm.Response {
	last := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == message.RoleUser {
			last = req.Messages[i].TextContent()
			break
		}
	}
	words := len(strings.Fields(last))
	prefix := last
	if r := []rune(prefix); len(r) > 100 {
		prefix = string(r[:100])
	}
	text := fmt.Sprintf("Mock response to %d-word prompt: %s", words, prefix)
	if req.Output != nil {
		text = exampleText(req.Output.Schema)
	}
	if req.Stream && req.OnDelta != nil {
		req.OnDelta(llm.Delta{Text: text})
	}
	return &llm.Response{Text: text, Model: modelOf(req), StopReason: llm.StopEnd,
		Usage: llm.Usage{InputTokens: requestTokens(req), OutputTokens: estimate(text)}}
}

func modelOf(req *llm.Request) string {
	if req.Model != "" {
		return req.Model
	}
	return "mock-model"
}

// estimate is the mock's token count: about four bytes a token.
func estimate(s string) int { return (len(s) + 3) / 4 }

// requestTokens estimates a request's input tokens like estimate does for
// RequestText(req), without building that string.
func requestTokens(req *llm.Request) int {
	n := 0
	if req.System != "" {
		n += len(req.System) + 1
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Blocks == nil {
			n += len(m.Text) + 1
		} else {
			n += len(m.TextContent()) + 1
		}
	}
	return (n + 3) / 4
}

// RequestText is all message text of a request, the system prompt first,
// one message per line: what match globs are tested against.
func RequestText(req *llm.Request) string {
	var b strings.Builder
	if req.System != "" {
		b.WriteString(req.System)
		b.WriteByte('\n')
	}
	for i := range req.Messages {
		b.WriteString(req.Messages[i].TextContent())
		b.WriteByte('\n')
	}
	return b.String()
}

// promptStart is the start of the last user message, for errors.
func promptStart(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == message.RoleUser {
			s := req.Messages[i].TextContent()
			if r := []rune(s); len(r) > 60 {
				s = string(r[:60]) + "..."
			}
			return s
		}
	}
	return ""
}

// Glob reports whether text matches pattern as a whole: `*` matches any
// run of characters (newlines included), `?` one character, and every
// other character itself.
func Glob(pattern, text string) bool {
	p, t := []rune(pattern), []rune(text)
	pi, ti := 0, 0
	star, mark := -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]):
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
