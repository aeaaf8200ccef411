package acp

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// stream sends what one turn stores on a session to the client as
// session/update notifications, in the order the store commits it: text
// deltas as agent_message_chunk as they stream (a reply that did not
// stream is sent whole when it is stored), each tool call as tool_call
// (pending when the reply is stored, in_progress when the tool starts)
// and its result as tool_call_update (completed or failed, with the
// result's text).
//
// The store's observers run on the writing goroutine with the session
// locked, so they only queue the events; one goroutine sends them.
type stream struct {
	ctx   context.Context // the connection's: a cancelled turn still flushes
	conn  *sdk.AgentSideConnection
	store *sessions.Store
	id    string

	mu     sync.Mutex
	queue  []sessions.Event
	closed bool
	wake   chan struct{}

	userLogged atomic.Bool // the turn's user message was logged
	// onExec, when set, is told of each tool call the turn starts (its
	// tool_executing state event), in the observer.
	onExec func(id string, e sessions.Event)

	// The sending goroutine's state.
	streamed  string          // the deltas of the reply being streamed
	announced map[string]bool // tool calls sent as tool_call
	withInput map[string]bool // and those of them sent with their arguments
	lastStop  string          // the stop reason of the turn's last model call
	limited   bool            // a budget or the turn cap ended the turn
	sendErr   error           // the first failed send: the client is gone
}

func newStream(ctx context.Context, conn *sdk.AgentSideConnection, store *sessions.Store, id string) *stream {
	return &stream{ctx: ctx, conn: conn, store: store, id: id, wake: make(chan struct{}, 1),
		announced: map[string]bool{}, withInput: map[string]bool{}}
}

// run runs one turn (handle) with the stream attached and returns its
// stop reason once every update has been sent. text is the prompt: it is
// stored after the turn when handle did not store it. A turn cancelled
// through ctx is healed and its session made active again (the agent
// loop marks it cancelled: here only the turn was). The error is the
// turn's failure, nil for a cancelled or limited turn.
func (s *stream) run(ctx context.Context, handle func() error, text string, log *slog.Logger) (sdk.StopReason, error) {
	stopObserve := s.store.Observe(s.observe)
	stopLogged := s.store.ObserveLogged(s.observeLogged)
	sent := make(chan struct{})
	go func() { s.send(); close(sent) }()

	err := handle()
	stopLogged()
	bg := context.WithoutCancel(ctx)
	if !s.userLogged.Load() {
		if _, serr := s.store.Apply(bg, s.id, &sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: text}}}); serr != nil {
			log.Error("storing a prompt failed", "session", s.id, "err", serr)
		}
	}
	cancelled := ctx.Err() != nil
	if cancelled {
		if herr := s.store.Heal(bg, s.id, "cancelled"); herr != nil {
			log.Error("healing a cancelled turn failed", "session", s.id, "err", herr)
		}
		s.reactivate(bg, log)
	}
	stopObserve()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-sent

	switch {
	case cancelled:
		return sdk.StopReasonCancelled, nil
	case s.limited:
		return sdk.StopReasonMaxTurnRequests, nil
	case err != nil:
		return "", err
	case s.lastStop == llm.StopMaxTokens:
		return sdk.StopReasonMaxTokens, nil
	case s.lastStop == "refusal" || s.lastStop == "content_filter":
		return sdk.StopReasonRefusal, nil
	}
	return sdk.StopReasonEndTurn, nil
}

// reactivate makes the session active again after a cancelled turn.
func (s *stream) reactivate(ctx context.Context, log *slog.Logger) {
	rec, err := s.store.Meta(ctx, s.id)
	if err != nil || rec.Status != sessions.StatusCancelled {
		return
	}
	ch := &sessions.Change{Status: sessions.StatusActive, Events: []sessions.Event{sessions.NewEvent(sessions.EventStatus,
		map[string]any{"status": string(sessions.StatusActive), "previous": string(rec.Status), "reason": "turn " + errCancelled.Error()})}}
	if _, err := s.store.Apply(ctx, s.id, ch); err != nil {
		log.Error("reactivating a session after a cancelled turn failed", "session", s.id, "err", err)
	}
}

// observe queues the session's committed and transient events.
func (s *stream) observe(e sessions.Event) {
	if e.SessionID != s.id {
		return
	}
	if s.onExec != nil && e.Type == agent.EventState && e.Data["state"] == agent.StateToolExecuting {
		s.onExec(s.id, e)
	}
	s.mu.Lock()
	s.queue = append(s.queue, e)
	s.mu.Unlock()
	s.signal()
}

// observeLogged notes the turn's user message being logged.
func (s *stream) observeLogged(e sessions.Event) {
	if e.SessionID == s.id && e.Type == sessions.EventMessage && e.Data["role"] == message.RoleUser {
		s.userLogged.Store(true)
	}
}

func (s *stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// send sends the queued events until the stream is closed and drained.
func (s *stream) send() {
	for {
		s.mu.Lock()
		batch, closed := s.queue, s.closed
		s.queue = nil
		s.mu.Unlock()
		for _, e := range batch {
			s.event(e)
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-s.wake
		}
	}
}

// event sends the updates of one event.
func (s *stream) event(e sessions.Event) {
	switch e.Type {
	case agent.EventTextDelta:
		if text, _ := e.Data["text"].(string); text != "" {
			s.streamed += text
			s.update(sdk.UpdateAgentMessageText(text))
		}
	case agent.EventState:
		if e.Data["state"] != agent.StateToolExecuting || e.CorrID == "" {
			return
		}
		name, _ := e.Data["tool"].(string)
		if !s.announced[e.CorrID] {
			s.announced[e.CorrID] = true
			s.update(startCall(message.ToolCall{ID: e.CorrID, Name: name}, sdk.ToolCallStatusInProgress))
			return
		}
		s.update(sdk.UpdateToolCall(sdk.ToolCallId(e.CorrID), sdk.WithUpdateStatus(sdk.ToolCallStatusInProgress)))
	case agent.EventToolCall:
		name, _ := e.Data["name"].(string)
		args, _ := e.Data["arguments"].(map[string]any)
		switch {
		case !s.announced[e.CorrID]:
			s.update(startCall(message.ToolCall{ID: e.CorrID, Name: name, Arguments: args}, sdk.ToolCallStatusPending))
		case !s.withInput[e.CorrID]:
			// announced by its tool starting (a quick tool runs before
			// its reply is committed): the arguments follow
			s.update(sdk.UpdateToolCall(sdk.ToolCallId(e.CorrID), sdk.WithUpdateRawInput(args)))
		}
		s.announced[e.CorrID], s.withInput[e.CorrID] = true, true
	case agent.EventLLMCall:
		s.lastStop, _ = e.Data["stop_reason"].(string)
	case agent.EventBudgetExhausted, agent.EventCostLimit, agent.EventTurnLimit:
		s.limited = true
	case sessions.EventMessage:
		s.message(e)
	}
}

// message sends the updates of an appended assistant or tool message.
// (User messages are the client's own prompt, or the loop's nudges and
// feedback; system messages are instructions: neither is shown.)
func (s *stream) message(e sessions.Event) {
	role, _ := e.Data["role"].(string)
	if role != message.RoleAssistant && role != message.RoleTool {
		return
	}
	index, _ := e.Data["index"].(int64)
	msgs, err := s.store.ReadMessages(s.ctx, s.id)
	if err != nil || index < 0 || index >= int64(len(msgs)) || msgs[index].Role != role {
		return // compacted or rewound since: nothing to show
	}
	m := &msgs[index]
	if role == message.RoleTool {
		if !s.announced[m.ToolCallID] {
			s.announced[m.ToolCallID] = true
			u := startCall(message.ToolCall{ID: m.ToolCallID, Name: m.Name}, resultStatus(m))
			u.ToolCall.Content = resultContent(m)
			s.update(u)
			return
		}
		s.update(finishCall(m))
		return
	}
	for _, u := range thoughts(m) {
		s.update(u)
	}
	text := m.TextContent()
	switch {
	case s.streamed == "":
	case strings.HasPrefix(text, s.streamed):
		text = text[len(s.streamed):]
	default:
		text = "" // streamed, then stored changed (sentinel lines removed): the client has it
	}
	s.streamed = ""
	if text != "" {
		s.update(sdk.UpdateAgentMessageText(text))
	}
	for _, call := range m.ToolCalls {
		if !s.announced[call.ID] {
			s.announced[call.ID], s.withInput[call.ID] = true, true
			s.update(startCall(call, sdk.ToolCallStatusPending))
		}
	}
}

// update sends one update, unless the client is gone.
func (s *stream) update(u sdk.SessionUpdate) {
	if s.sendErr != nil {
		return
	}
	s.sendErr = s.conn.SessionUpdate(s.ctx, sdk.SessionNotification{SessionId: sdk.SessionId(s.id), Update: u})
}
