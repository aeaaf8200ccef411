// Package agent is skein's turn loop in pure Go: it loads a session's
// messages as the prefix, appends the user prompt, calls a model through
// an llm fallback chain with retries, runs the tools the model asks for,
// appends the assistant message and one result per call, and repeats
// until the model answers without tools (or a budget, the persistent-mode
// nudge limit, a timeout, a callback or an error ends it).
//
// Every message and event is written to the session store as the loop
// goes, one step at a time (group commit): the model step — queued
// feedback, turn_start, llm_call, the reply and the tool_call events of
// all its calls — is one commit, made before any tool runs; the tool step
// — every result, turn_end — is another. A commit is one backend
// transaction (sessions.Store.Stage and Commit), so a durable store pays
// two commits per iteration, not one per event. Events reach Hooks.Emit
// only once committed, so whatever a subscriber saw is stored. A process
// crash loses at most the step in progress: the stored transcript is a
// prefix of what the loop did, and a reply whose tool results were lost
// is healed ("interrupted") when the session is next opened. Retry
// events and the loop's ending are committed at once. Whatever ends the
// loop, the session stays valid provider input: tool calls left without
// results are healed with error results.
//
// The engine knows nothing of Starlark: package builtins adapts Starlark
// functions to Tool and Starlark callbacks to Hooks.
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/compact"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/schema"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/telemetry"
)

// Status is how a loop ended.
type Status string

// Loop statuses.
const (
	StatusDone            Status = "done"             // the model finished (or a callback stopped the loop)
	StatusStuck           Status = "stuck"            // persistent mode: too many text-only replies without the sentinel
	StatusBudgetExhausted Status = "budget_exhausted" // max_iterations model calls were made
	StatusTimeout         Status = "timeout"          // the loop's own wall-clock limit passed
	StatusTurnLimit       Status = "turn_limit"       // the session reached its turn cap: the loop was refused (an error, and a turn_limit event)
	StatusFailed          Status = "failed"           // reported on events; a failed loop returns an error
)

// DoneSentinel ends a persistent loop when a text-only reply contains it.
const DoneSentinel = "##DONE##"

// Nudge is the user message a persistent loop sends after a text-only
// reply without the sentinel.
const Nudge = "You have not finished yet. Continue working on the task; when it is complete, reply with " + DoneSentinel + " on its own line."

// Event types the loop logs (besides the store's "message").
const (
	EventTurnStart        = "turn_start"
	EventTurnEnd          = "turn_end"
	EventLLMCall          = "llm_call"
	EventLLMRetry         = "llm_retry"
	EventTextDelta        = "text_delta"    // delivered to subscribers, never stored
	EventState            = "session_state" // what the loop is doing now; delivered, never stored
	EventChildState       = "child_state"   // a state of a loop started by one of this session's tools; published, never stored
	EventToolCall         = "tool_call"
	EventToolResult       = "tool_result"
	EventFeedbackInjected = sessions.EventDirectiveInjected // queued feedback reached the loop
	EventBudgetExhausted  = "budget_exhausted"
	EventCostLimit        = "cost_limit"
	EventTurnLimit        = "turn_limit"
	EventLoopStuck        = "loop_stuck"
	EventError            = "error"
	EventCancelled        = "cancelled"
	// EventSecurityDecision records a tool call refused by a rule (the
	// workspace policy, an approval): {decision: "deny", action, rule,
	// reason, tool}, its corr_id the call's id.
	EventSecurityDecision = "security_decision"
)

// States of a "session_state" event: what a running loop is doing. A live view
// (skein serve's viewer) shows them; they are not stored, since the log
// already says the same after the fact (turn_start, llm_call, tool_call,
// tool_result, turn_end) and a stored "generating" of a process that
// died would be false on every later read.
const (
	StateLLMGenerating = "llm_generating" // a model call is in flight (retries included)
	StateToolExecuting = "tool_executing" // a tool runs; the event names it
	StateIdle          = "idle"           // the loop ended (any way)
)

// Transient reports whether events of type typ are delivered live (to
// subscribers and the store's observers) but never stored: text_delta,
// session_state and child_state. Their seq is that of the latest stored
// event.
func Transient(typ string) bool {
	return typ == EventTextDelta || typ == EventState || typ == EventChildState
}

// ToolErrors says what a failing tool does to the loop.
type ToolErrors string

// Tool error modes.
const (
	ToolErrorsReport ToolErrors = "report" // the failure becomes an error result the model sees
	ToolErrorsRaise  ToolErrors = "raise"  // the failure stops the loop with the tool's error
)

// Tool is one tool the model may call.
type Tool interface {
	Spec() llm.ToolSpec
	// Run executes a call whose arguments were validated against the
	// spec's schema. The output is the result text the model sees.
	Run(ctx context.Context, call message.ToolCall) (string, error)
}

// TurnInfo describes a finished turn to the post-turn callback.
type TurnInfo struct {
	SessionID string
	Iteration int
	Text      string
	ToolCalls []string
	Usage     llm.Usage
}

// PostTurn is what a post-turn callback asks for.
type PostTurn struct {
	Stop     bool
	Feedback string // queued as a user message for the next turn
}

// Hooks connect the loop to its host.
type Hooks struct {
	// Emit receives every event in order: stored events after they were
	// written, text deltas as they stream. An error stops the loop and is
	// returned unchanged.
	Emit func(sessions.Event) error
	// PostTurn runs after every turn.
	PostTurn func(TurnInfo) (PostTurn, error)
	// Listening, when set, reports whether Emit delivers the transient
	// "session_state" events anywhere. When it returns false and no observer
	// watches the store (sessions.Store.Observed), the loop does not
	// build them at all. Unset means Emit always listens.
	Listening func() bool
	// ToolCalled, when set, runs as a tool call starts, when its name
	// joins Result.ToolCalls; ToolEnded as it ends, when its name joins
	// Result.Succeeded or (failed) Result.Failed. For a caller that keeps
	// its own form of those lists as the loop goes, rather than
	// converting them, as long as the loop ran, at its end.
	ToolCalled func(name string)
	ToolEnded  func(name string, failed bool)
}

// Defaults of a loop: DefaultConfig has them, and Run and Call read a
// zero field of Config as its default (see each field).
const (
	DefaultMaxIterations = 50
	DefaultMaxNudges     = 3
	// DefaultMaxTurns caps the turns of a session that has no cap of its
	// own (agent_session_open's max_turns).
	DefaultMaxTurns = 50
	// DefaultQuickTool is Config.QuickTool's default: about what running
	// a trivial in-process tool takes, and less than any tool that
	// starts a process or waits for the network.
	DefaultQuickTool = time.Millisecond
)

// Config is one loop. The zero value of every field but Store, SessionID
// and Chain means its default (DefaultConfig); where 0 is also a
// meaningful setting, a negative value asks for it.
type Config struct {
	Store     *sessions.Store
	SessionID string // opened by the loop (created if missing, made active)
	// Agent names the agent the loop runs, for traces (invoke_agent
	// AGENT); "" for a loop of no named agent.
	Agent  string
	Prompt string
	System string
	// Chain is the provider (and fallbacks) each model call goes through.
	Chain []llm.Target
	// Retry retries each model call on a transient error. Its zero value
	// makes no retries; DefaultConfig has llm.DefaultRetry.
	Retry llm.RetryPolicy
	// Request carries the per-call options (Model, Temperature, MaxTokens,
	// Stop, Stream, ToolChoice); Messages, System and Tools are filled in.
	Request llm.Request
	Tools   []Tool
	// MaxIterations bounds the model calls of one loop (0:
	// DefaultMaxIterations).
	MaxIterations int
	Persistent    bool

	// NestedIterations, when set, returns the iterations of the loops
	// run inside this one (sub-agents its tools spawned), which count
	// against MaxIterations as well as the loop's own.
	NestedIterations func() int

	// ParentStore and ParentID, when set, are the session of the loop
	// whose tool started this one (a sub-agent's parent): each state this
	// loop announces is also published to ParentStore's observers as a
	// child_state event of the parent (skein serve streams it to the
	// parent's clients).
	ParentStore *sessions.Store
	ParentID    string

	// MaxNudges is how many text-only replies a persistent loop nudges
	// before it is stuck (0: DefaultMaxNudges; negative: none).
	MaxNudges int
	Timeout   time.Duration // 0: none
	// MaxTurns caps the session's turns for this loop (0: the session's
	// own cap, else DefaultSessionCap; negative: no cap).
	MaxTurns int
	// DefaultSessionCap is the cap of a session without one when MaxTurns
	// is 0 (0: DefaultMaxTurns; negative: none). A VM sets it from
	// --max-turns.
	DefaultSessionCap int
	// ToolErrors says what a failing tool does ("": ToolErrorsReport).
	ToolErrors ToolErrors
	// Clock reports the time (nil: time.Now).
	Clock func() time.Time
	// QuickTool is how long a tool's last run in this loop may have taken
	// for the tool to run before the reply that calls it is committed
	// (0: DefaultQuickTool; negative: never). A reply whose tools are all
	// quick commits together with their results, one commit for the
	// iteration; any other reply commits before its tools run (see
	// "When writes commit" in docs/semantics.md).
	QuickTool time.Duration
	Hooks     Hooks
	// Compaction manages the context (nil: the whole session is sent and
	// nothing is compacted).
	Compaction *Compaction
	// Prices prices every call (nil: every cost is unknown; the mock is
	// free).
	Prices *llm.Prices
	// Budgets count what the calls cost. Before each call, its input is
	// priced from an estimate of its tokens: when that would take any
	// budget over its cap, the call is not made and the loop ends with
	// StatusBudgetExhausted and a cost_limit event. A capped budget needs
	// the price of the model: without it the loop fails before any call.
	Budgets []*llm.Budget
	// Approve names the tools that run only when Approval accepts the
	// call (an agent's approve list).
	Approve []string
	// Approval decides a call of a tool in Approve: true runs it; false
	// (or no Approval) makes its result the error "the call was not
	// approved". An error stops the loop.
	Approval func(tool string, args map[string]any) (bool, error)
	// Output, if set, asks for structured output and validates the final
	// reply (see Output).
	Output *Output
}

// DefaultConfig returns a Config with every default spelled out; a
// caller sets Store, SessionID, Chain and Prompt.
func DefaultConfig() Config {
	return Config{
		Retry:             llm.DefaultRetry(),
		Request:           llm.Request{Stream: true},
		MaxIterations:     DefaultMaxIterations,
		MaxNudges:         DefaultMaxNudges,
		DefaultSessionCap: DefaultMaxTurns,
		ToolErrors:        ToolErrorsReport,
		Clock:             time.Now,
		QuickTool:         DefaultQuickTool,
	}
}

// withDefaults replaces zero fields by their defaults and the negative
// "none" settings by 0.
func (c Config) withDefaults() Config {
	if c.MaxIterations == 0 {
		c.MaxIterations = DefaultMaxIterations
	}
	switch {
	case c.MaxNudges == 0:
		c.MaxNudges = DefaultMaxNudges
	case c.MaxNudges < 0:
		c.MaxNudges = 0
	}
	if c.DefaultSessionCap == 0 {
		c.DefaultSessionCap = DefaultMaxTurns
	}
	if c.ToolErrors == "" {
		c.ToolErrors = ToolErrorsReport
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.QuickTool == 0 {
		c.QuickTool = DefaultQuickTool
	}
	return c
}

// Result is what a loop did.
type Result struct {
	Status      Status
	Text        string // all assistant text of this loop, joined by newlines
	VisibleText string // the last reply without sentinel lines
	SessionID   string
	Iterations  int // model turns
	Calls       int // provider calls, retries and fallbacks included
	Usage       llm.Usage
	Duration    time.Duration
	ToolCalls   []string // names, in call order
	Succeeded   []string
	Failed      []string
	Messages    []message.Message // appended by this loop, in order
	Compactions int               // automatic compactions during the loop
	// CostUSD is what the loop's calls cost; CostKnown is false when the
	// price of a model that answered is unknown.
	CostUSD   float64
	CostKnown bool
	// Output is the final reply parsed as JSON and validated against
	// Config.Output (nil without one); OutputRepairs counts the repair
	// turns it took.
	Output        any
	OutputRepairs int
}

// TurnLimitError is returned when the session reached its turn cap.
type TurnLimitError struct {
	SessionID string
	Cap       int
}

func (e *TurnLimitError) Error() string {
	return fmt.Sprintf("session '%s' reached its turn cap of %d (turn_limit)", e.SessionID, e.Cap)
}

// CancelledError is returned when the run's context was cancelled
// (Ctrl-C, --timeout) while the loop ran.
type CancelledError struct{ Reason string }

func (e *CancelledError) Error() string { return "cancelled: " + e.Reason }

// loop is the state of one running loop.
type loop struct {
	cfg Config
	ctx context.Context // the loop's context (with its timeout)
	// writeCtx is ctx without its cancellation: the loop's writes use it,
	// so a cancelled run still stores what it did.
	writeCtx context.Context
	res      *Result
	clock    func() time.Time
	start    time.Time
	texts    []string
	nudges   int
	reply    *llm.Response // the last reply (Call)
	// toolNames, toolTokens and systemTokens are what every turn_start
	// records of the request (built on the first turn).
	toolNames    []any
	toolTokens   int
	systemTokens int
	// specs and chain are the tools' specs and the counted provider chain
	// of every model call, built on the first.
	specs []llm.ToolSpec
	chain []llm.Target
	// emitErr is the first error a hook returned during the current
	// model call (from a streamed delta or a retry event).
	emitErr error
	// unsent are the events of the changes staged since the last commit:
	// subscribers get them once they are committed.
	unsent []sessions.Event
	// wire keeps the messages' wire forms between the loop's model calls,
	// so each request encodes only the messages added since the last.
	wire llm.WireCache
	// sentSeq is the seq of the latest stored event delivered to the
	// hooks (before the first delivery: the newest event before the
	// loop's first). Transient events (text_delta, state) carry it, so
	// subscribers see seq never decrease and never see a seq before the
	// event that has it.
	sentSeq  int64
	seqKnown bool
	// turn is set for a loop (Run), not a single call (Call): it ends
	// with a session:turn_completed event.
	turn bool
	// costStopped is set when a cost cap stopped the loop; completedLogged
	// once its session:turn_completed event is staged.
	costStopped, completedLogged bool
	// state is the state last announced ("" before the first).
	state string
	// ran is how long each tool's last run in this loop took, by name
	// (see quick).
	ran map[string]time.Duration
	// session is what opening the session found: its turns and cap.
	session sessions.Opened
	// usage is the context size the provider reported for the last call
	// (input plus output tokens) and usageAt the session length it covers;
	// see estimate. callLen is the session length sent in the current call.
	usage, usageAt, callLen int
	viewport                bool
	// schemas holds the compiled parameter schemas of the tools called so
	// far (see argsSchema).
	schemas map[string]*schema.Schema
}

// Run runs the loop. It returns an error when the loop fails (a model
// call failing after retries and fallbacks, a tool error in raise mode, a
// failing callback or subscriber, cancellation of ctx); the session is
// healed and its status and an error or cancelled event are logged first
// — except after a write conflict (sessions.ErrConflict): the session was
// written by another process, and the loop leaves it to that process.
// The loop's own Timeout is not an error: it ends with StatusTimeout.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	ctx, span := telemetry.Agent(ctx, cfg.Agent, cfg.SessionID, chainProvider(cfg.Chain), chainModel(cfg))
	_, res, err := execute(ctx, cfg, (*loop).run)
	span.End(err, errorType(err))
	return res, err
}

// chainProvider is the name of the first provider of chain, or "".
func chainProvider(chain []llm.Target) string {
	if len(chain) == 0 || chain[0].Provider == nil {
		return ""
	}
	return chain[0].Provider.Name()
}

// chainModel is the model asked of the first target.
func chainModel(cfg Config) string {
	if len(cfg.Chain) > 0 && cfg.Chain[0].Model != "" {
		return cfg.Chain[0].Model
	}
	return cfg.Request.Model
}

// errorType is a span's error.type for err: a provider error's category,
// else "" (the span's default).
func errorType(err error) string {
	if e, ok := llm.AsError(err); ok {
		return string(e.Category)
	}
	return ""
}

// Call makes a single model call on the session: it appends the prompt
// and the reply and returns the reply. Tool calls in the reply are not
// run; a caller that keeps the session must inject their results. Turns
// are not counted. Failures are handled as in Run.
func Call(ctx context.Context, cfg Config) (*llm.Response, *Result, error) {
	return execute(ctx, cfg, (*loop).once)
}

func (l *loop) once() error {
	if err := l.stage(&sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: l.cfg.Prompt}}}); err != nil {
		return err
	}
	l.res.Iterations = 1
	resp, err := l.call(false)
	if errors.Is(err, errCostLimit) {
		l.res.Iterations = 0
		return nil
	}
	if err != nil {
		return err
	}
	for {
		l.reply = resp
		l.res.Status = StatusDone
		if err := l.appendReply(resp); err != nil {
			return err
		}
		if l.cfg.Output == nil || len(resp.ToolCalls) > 0 {
			return nil
		}
		ok, err := l.checkOutput(resp.Text)
		if ok || err != nil {
			return err
		}
		l.res.Iterations++
		if resp, err = l.call(false); err != nil {
			if errors.Is(err, errCostLimit) {
				// no reply matched the schema: nothing to return
				l.reply, l.res.Iterations = nil, l.res.Iterations-1
				return nil
			}
			return err
		}
	}
}

func execute(ctx context.Context, cfg Config, body func(*loop) error) (*llm.Response, *Result, error) {
	cfg = cfg.withDefaults()
	l := &loop{cfg: cfg, clock: cfg.Clock, res: &Result{SessionID: cfg.SessionID, CostKnown: true}}
	var err error
	if l.session, err = cfg.Store.Open(ctx, cfg.SessionID, 0); err != nil {
		return nil, l.res, err
	}
	// Pinned, the session stays live however many sessions the loop's
	// tools and sub-agents (or other clients) open while it runs.
	unpin, err := cfg.Store.Pin(ctx, cfg.SessionID)
	if err != nil {
		return nil, l.res, err
	}
	defer unpin()
	if err := l.checkPriced(); err != nil {
		return nil, l.res, err
	}
	l.start = l.clock()
	loopCtx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		loopCtx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	l.ctx, l.writeCtx = loopCtx, context.WithoutCancel(loopCtx)
	err = body(l)
	if err == nil && l.turn {
		err = l.complete()
	}
	if err == nil {
		err = l.commit()
	}
	l.res.Duration = l.clock().Sub(l.start)
	l.res.Text = strings.Join(l.texts, "\n")
	if err == nil {
		if err := l.idle(); err != nil {
			return nil, l.res, err
		}
		return l.reply, l.res, nil
	}
	// Whatever follows ends the loop: it is idle then.
	defer func() { _ = l.idle() }()
	if errors.Is(err, sessions.ErrConflict) {
		// Another process wrote the session: it is theirs now. Healing it
		// or marking it failed here would write into their run.
		return nil, l.res, err
	}
	// Store what the loop did before it ended, and tell subscribers. A
	// conflict here means the session is another process's now, as above.
	if cerr := l.commit(); errors.Is(cerr, sessions.ErrConflict) {
		return nil, l.res, cerr
	}
	if ctx.Err() == nil && loopCtx.Err() != nil {
		// the loop's own timeout: a result, not a failure
		l.res.Status = StatusTimeout
		l.finish("cancelled", sessions.StatusActive, sessions.NewEvent(EventCancelled, map[string]any{"reason": "timeout"}),
			turnCompleted(StopCancelled, StatusTimeout, "", ""))
		return nil, l.res, nil
	}
	if ctx.Err() != nil {
		reason := "cancelled"
		if cause := context.Cause(ctx); cause != nil {
			reason = cause.Error()
		}
		l.finish("cancelled", sessions.StatusCancelled, sessions.NewEvent(EventCancelled, map[string]any{"reason": reason}),
			turnCompleted(StopCancelled, "", "", ""))
		return nil, l.res, &CancelledError{Reason: reason}
	}
	var turnLimit *TurnLimitError
	if errors.As(err, &turnLimit) {
		return nil, l.res, err // only the turn_limit event was written
	}
	data := map[string]any{"message": err.Error()}
	if e, ok := llm.AsError(err); ok {
		data["category"], data["provider"] = string(e.Category), e.Provider
	}
	l.finish("interrupted", sessions.StatusError, sessions.NewEvent(EventError, data), failed(err))
	return nil, l.res, err
}

// nestedIterations returns the iterations of the loops run inside this
// one (Config.NestedIterations).
func (l *loop) nestedIterations() int {
	if l.cfg.NestedIterations == nil {
		return 0
	}
	return l.cfg.NestedIterations()
}

// idle announces the idle state at the end of a loop that announced
// another one.
func (l *loop) idle() error {
	if l.state == "" {
		return nil
	}
	return l.setState(StateIdle, nil)
}

// finish heals open tool calls and records how the loop ended. It writes
// with a context that is not cancelled: the run's may be. Its own
// failures are not reported: the loop is already ending with the error
// (or status) that matters. A session left with open calls (when even
// the heal failed) is healed on its next load from a durable store; a
// live one makes the next loop fail loudly, naming the open calls.
func (l *loop) finish(healReason string, status sessions.Status, ev, completed sessions.Event) {
	ctx := l.writeCtx
	_ = l.cfg.Store.Heal(ctx, l.cfg.SessionID, healReason)
	evs := []sessions.Event{ev}
	if l.turn {
		evs = append(evs, completed)
	}
	events, err := l.cfg.Store.Apply(ctx, l.cfg.SessionID, &sessions.Change{Status: status, Events: evs})
	if err == nil {
		_ = l.emit(events...)
	}
}

// stage applies a change to the session for the step's commit (see
// commit); appended messages are recorded in the result as the store
// keeps them (known secrets redacted).
func (l *loop) stage(ch *sessions.Change) error {
	events, err := l.cfg.Store.Stage(l.writeCtx, l.cfg.SessionID, ch)
	if err != nil {
		return err
	}
	for _, m := range ch.Append {
		l.res.Messages = append(l.res.Messages, l.cfg.Store.Redactor().RedactMessage(m))
	}
	if len(events) > 0 {
		if !l.seqKnown {
			l.sentSeq, l.seqKnown = events[0].Seq-1, true
		}
	}
	l.unsent = append(l.unsent, events...)
	return nil
}

// commit writes the staged changes of the step to the backend in one
// transaction and then emits their events. It writes with a context that
// is not cancelled: a cancelled run still stores what it did.
func (l *loop) commit() error {
	if err := l.cfg.Store.Commit(l.writeCtx, l.cfg.SessionID); err != nil {
		return err
	}
	events := l.unsent
	l.unsent = nil
	err := l.emit(events...)
	if l.unsent == nil {
		// The backing array serves the next step: emit keeps no event.
		clear(events)
		l.unsent = events[:0]
	}
	return err
}

// write stages a change and commits at once.
func (l *loop) write(ch *sessions.Change) error {
	if err := l.stage(ch); err != nil {
		return err
	}
	return l.commit()
}

func (l *loop) emit(events ...sessions.Event) error {
	for _, e := range events {
		if !Transient(e.Type) {
			l.sentSeq, l.seqKnown = e.Seq, true
		}
		if l.cfg.Hooks.Emit == nil {
			continue
		}
		if err := l.cfg.Hooks.Emit(e); err != nil {
			return err
		}
	}
	return nil
}

// event stages an event.
func (l *loop) event(typ string, data map[string]any) error {
	return l.stage(&sessions.Change{Events: []sessions.Event{sessions.NewEvent(typ, data)}})
}

// setState announces what the loop is doing when it changes: a "session_state"
// event, published to the store's observers (live viewers) and emitted
// to the hooks, never stored. Every tool call is a change (the event
// names the tool, and its corr_id is the call's id).
func (l *loop) setState(state string, call *message.ToolCall) error {
	if state == l.state && call == nil {
		return nil
	}
	l.state = state
	if !l.stateHeard() {
		return nil
	}
	e := sessions.Event{Type: EventState, Seq: l.sentSeq, SessionID: l.cfg.SessionID, Time: l.clock(), Data: map[string]any{"state": state}}
	if call != nil {
		e.CorrID, e.Data["tool"] = call.ID, call.Name
	}
	if l.cfg.Store != nil {
		l.cfg.Store.Publish(e)
	}
	if p := l.cfg.ParentStore; p != nil && l.cfg.ParentID != "" && p.Observed() {
		c := sessions.Event{Type: EventChildState, Seq: p.LastSeq(l.cfg.ParentID), SessionID: l.cfg.ParentID, Time: e.Time, CorrID: e.CorrID,
			Data: map[string]any{"state": state, "child_id": l.cfg.SessionID}}
		if call != nil {
			c.Data["tool"] = call.Name
		}
		p.Publish(c)
	}
	return l.emit(e)
}

// stateHeard reports whether a "session_state" event would reach anyone: the
// store's observers or the hooks.
func (l *loop) stateHeard() bool {
	if l.cfg.Store != nil && l.cfg.Store.Observed() || l.cfg.ParentStore != nil && l.cfg.ParentStore.Observed() {
		return true
	}
	return l.cfg.Hooks.Emit != nil && (l.cfg.Hooks.Listening == nil || l.cfg.Hooks.Listening())
}

// turnCap is the turn cap of this loop: Config.MaxTurns, else the
// session's own, else the default (0: none).
func turnCap(cfg Config, session sessions.Opened) int {
	switch {
	case cfg.MaxTurns < 0:
		return 0
	case cfg.MaxTurns > 0:
		return cfg.MaxTurns
	case session.MaxTurns > 0:
		return session.MaxTurns
	}
	return max(cfg.DefaultSessionCap, 0)
}

func (l *loop) run() error {
	cfg := l.cfg
	l.turn = true
	if limit := turnCap(cfg, l.session); limit > 0 && l.session.Turns >= limit {
		// Refused before anything else: the events say so in the log.
		tl := &TurnLimitError{SessionID: cfg.SessionID, Cap: limit}
		if err := l.write(&sessions.Change{Events: TurnLimitEvents(tl, l.session.Turns)}); err != nil {
			return err
		}
		return tl
	}
	start := &sessions.Change{AddTurns: 1, Append: []message.Message{{Role: message.RoleUser, Text: cfg.Prompt}}}
	if err := l.stage(start); err != nil {
		return err
	}
	contextFull := false
	for {
		if err := l.ctx.Err(); err != nil {
			return err
		}
		if l.res.Iterations+l.nestedIterations() >= cfg.MaxIterations {
			l.res.Status = StatusBudgetExhausted
			return l.event(EventBudgetExhausted, map[string]any{"status": string(StatusBudgetExhausted), "max_iterations": int64(cfg.MaxIterations)})
		}
		if err := l.deliverFeedback(); err != nil {
			return err
		}
		l.res.Iterations++
		iteration := int64(l.res.Iterations)
		start, err := l.turnStart(iteration)
		if err != nil {
			return err
		}
		if err := l.event(EventTurnStart, start); err != nil {
			return err
		}
		resp, err := l.call(contextFull)
		if errors.Is(err, errCostLimit) {
			l.res.Iterations--
			return nil
		}
		if e, ok := llm.AsError(err); ok && e.Category == llm.ContextLength && !contextFull && cfg.Compaction != nil && cfg.Compaction.Enabled {
			contextFull = true // compact and retry this turn once
			l.res.Iterations--
			continue
		}
		contextFull = false
		if err != nil {
			return err
		}
		if err := l.appendReply(resp); err != nil {
			return err
		}
		names := make([]string, len(resp.ToolCalls))
		for i, c := range resp.ToolCalls {
			names[i] = c.Name
		}
		if len(resp.ToolCalls) > 0 {
			if err := l.logToolCalls(resp.ToolCalls); err != nil {
				return err
			}
			// The model step ends here: it is stored before its tools run,
			// unless they are quick, when it commits with their results.
			if !l.quick(resp.ToolCalls) {
				if err := l.commit(); err != nil {
					return err
				}
			}
		}
		for _, c := range resp.ToolCalls {
			if err := l.runTool(c); err != nil {
				return err
			}
		}
		stop := false
		if len(resp.ToolCalls) == 0 {
			var err error
			if stop, err = l.textOnly(resp.Text); err != nil {
				return err
			}
			if stop && l.res.Status == StatusDone && cfg.Output != nil {
				if stop, err = l.checkOutput(l.res.VisibleText); err != nil {
					return err
				}
			}
		} else {
			l.nudges = 0
		}
		if err := l.event(EventTurnEnd, map[string]any{"iteration": iteration, "tool_calls": int64(len(resp.ToolCalls))}); err != nil {
			return err
		}
		if stop {
			// the loop's end commits with the tool step
			if err := l.complete(); err != nil {
				return err
			}
		}
		if err := l.commit(); err != nil { // the tool step
			return err
		}
		if stop {
			return nil
		}
		if cfg.Hooks.PostTurn != nil {
			pt, err := cfg.Hooks.PostTurn(TurnInfo{SessionID: cfg.SessionID, Iteration: int(iteration), Text: resp.Text, ToolCalls: names, Usage: resp.Usage})
			if err != nil {
				return err
			}
			if pt.Feedback != "" {
				msg := message.Message{Role: message.RoleUser, Text: pt.Feedback, Metadata: map[string]any{"feedback_kind": "post_turn_callback"}}
				if err := cfg.Store.QueueFeedback(l.ctx, cfg.SessionID, msg); err != nil {
					return err
				}
			}
			if pt.Stop {
				l.res.Status = StatusDone
				return nil
			}
		}
	}
}

// quick reports whether every tool of calls took less than
// Config.QuickTool the last time it ran in this loop. Such a reply is not
// committed before its tools run: it commits with their results, which
// halves an iteration's commits (and fsyncs, with durability full) when
// the tools are in-process work that takes microseconds. A crash while
// they run loses the reply with them; nothing of it had reached a
// subscriber. A tool not run yet in the loop is not quick, so a tool
// that waits on a process or the network commits its call first.
func (l *loop) quick(calls []message.ToolCall) bool {
	if l.cfg.QuickTool < 0 {
		return false
	}
	for _, c := range calls {
		if d, ok := l.ran[c.Name]; !ok || d >= l.cfg.QuickTool {
			return false
		}
	}
	return true
}

// textOnly handles a reply without tool calls; it reports whether the
// loop ends.
func (l *loop) textOnly(text string) (bool, error) {
	if !l.cfg.Persistent || strings.Contains(text, DoneSentinel) {
		l.res.Status = StatusDone
		return true, nil
	}
	if l.nudges >= l.cfg.MaxNudges {
		l.res.Status = StatusStuck
		return true, l.event(EventLoopStuck, map[string]any{"nudges": int64(l.nudges)})
	}
	l.nudges++
	return false, l.stage(&sessions.Change{Append: []message.Message{{Role: message.RoleUser, Text: Nudge, Metadata: map[string]any{"nudge": int64(l.nudges)}}}})
}

// deliverFeedback appends queued feedback at the start of a turn.
func (l *loop) deliverFeedback() error {
	pending := l.cfg.Store.TakeFeedback(l.cfg.SessionID)
	for _, m := range pending {
		kind, _ := m.Metadata["feedback_kind"].(string)
		ch := &sessions.Change{Append: []message.Message{m},
			Events: []sessions.Event{sessions.NewEvent(EventFeedbackInjected, map[string]any{"kind": kind})}}
		if err := l.stage(ch); err != nil {
			return err
		}
	}
	return nil
}

// call makes one model call through the chain.
func (l *loop) call(contextFull bool) (*llm.Response, error) {
	cfg := l.cfg
	msgs, err := l.contextMessages(contextFull)
	if err != nil {
		return nil, err
	}
	req := cfg.Request
	req.System = cfg.System
	req.Messages = msgs
	req.Cache = &l.wire
	if l.specs == nil {
		// Built once: the tools do not change during the loop, and
		// providers only read a request's specs.
		l.specs = make([]llm.ToolSpec, len(cfg.Tools))
		for i, t := range cfg.Tools {
			l.specs[i] = t.Spec()
		}
		l.chain = make([]llm.Target, len(cfg.Chain))
		for i, t := range cfg.Chain {
			l.chain[i] = llm.Target{Provider: &counting{Provider: t.Provider, calls: &l.res.Calls}, Model: t.Model}
		}
	}
	req.Tools = l.specs
	if cfg.Output != nil {
		req.Output = &cfg.Output.Output
	}
	l.emitErr = nil
	if req.Stream && cfg.Hooks.Emit != nil {
		req.OnDelta = l.onDelta
	}
	if err := l.checkBudgets(&req); err != nil {
		return nil, err
	}
	retry := cfg.Retry
	retry.OnRetry = l.onRetry
	retry.OnFallback = l.onFallback
	if err := l.setState(StateLLMGenerating, nil); err != nil {
		return nil, err
	}
	started := l.clock()
	cctx, span := telemetry.Chat(l.ctx, telemetry.ChatRequest{SessionID: cfg.SessionID, Provider: chainProvider(l.chain),
		Model: cmp.Or(req.Model, chainModel(cfg)), Temperature: req.Temperature, MaxTokens: req.MaxTokens})
	if span.CaptureContent() {
		span.SetContent(telemetry.KeySystemInstructions, telemetry.SystemInstructions(req.System))
		span.SetContent(telemetry.KeyInputMessages, telemetry.InputMessages(msgs))
	}
	resp, err := llm.Fallback(cctx, l.chain, retry, &req)
	if l.emitErr != nil {
		err = l.emitErr
	}
	if err != nil {
		span.End(err, errorType(err))
		return nil, err
	}
	span.Replied(telemetry.ChatResponse{Provider: resp.Provider, RequestProvider: chainProvider(l.chain), Model: resp.Model, InputTokens: resp.Usage.InputTokens,
		OutputTokens: resp.Usage.OutputTokens, FinishReason: resp.StopReason})
	if span.CaptureContent() {
		span.SetContent(telemetry.KeyOutputMessages, telemetry.OutputMessages(resp.Text, resp.ToolCalls, resp.StopReason))
	}
	span.End(nil, "")
	l.res.Usage = l.res.Usage.Add(resp.Usage)
	data := make(map[string]any, 10)
	data["provider"], data["model"], data["latency_ms"], data["stop_reason"] = resp.Provider, resp.Model, l.clock().Sub(started).Milliseconds(), resp.StopReason
	resp.Usage.Put(data)
	if cost, known := l.account(resp, req.Model); known {
		data["cost_usd"] = cost
	}
	return resp, l.event(EventLLMCall, data)
}

// onDelta emits a streamed text delta of the current model call.
func (l *loop) onDelta(d llm.Delta) {
	if d.Text == "" || l.emitErr != nil {
		return
	}
	e := sessions.Event{Type: EventTextDelta, Seq: l.sentSeq, SessionID: l.cfg.SessionID, Time: l.clock(), Data: map[string]any{"text": d.Text}}
	if l.cfg.Store != nil {
		l.cfg.Store.Publish(e) // live viewers (skein serve) see the stream too
	}
	l.emitErr = l.cfg.Hooks.Emit(e)
}

// onRetry records a retry of the current model call.
func (l *loop) onRetry(attempt int, e *llm.Error, wait time.Duration) {
	if l.emitErr == nil { // delivered at once: the wait may be long
		l.emitErr = l.write(&sessions.Change{Events: []sessions.Event{sessions.NewEvent(EventLLMRetry, map[string]any{"attempt": int64(attempt), "provider": e.Provider,
			"category": string(e.Category), "message": e.Message, "wait_ms": wait.Milliseconds()})}})
	}
}

// EventFallback records that a model call moved on to the next model of
// its chain: {from, to, reason}, from and to as "provider/model", reason
// the category of the error that ended the previous one.
const EventFallback = "fallback"

// onFallback records a move to the next model of the chain.
func (l *loop) onFallback(from, to string, reason llm.Category) {
	if l.emitErr == nil {
		l.emitErr = l.write(&sessions.Change{Events: []sessions.Event{sessions.NewEvent(EventFallback, map[string]any{"from": from, "to": to, "reason": string(reason)})}})
	}
}

// counting counts provider calls.
type counting struct {
	llm.Provider
	calls *int
}

func (c *counting) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	*c.calls++
	return c.Provider.Complete(ctx, req)
}

// appendReply stores the assistant message of a model reply.
func (l *loop) appendReply(resp *llm.Response) error {
	msg := message.Message{Role: message.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls, Model: resp.Model, Usage: resp.Usage.Map()}
	if len(resp.Thinking) > 0 {
		msg.Blocks = append(append([]message.Block{}, resp.Thinking...), message.Block{Type: message.BlockText, Text: resp.Text})
		msg.Text = ""
	}
	if !l.viewport {
		l.usage, l.usageAt = resp.Usage.InputTokens+resp.Usage.OutputTokens, l.callLen+1
	}
	if resp.Text != "" {
		l.texts = append(l.texts, resp.Text)
		l.res.VisibleText = StripSentinel(resp.Text)
	} else if len(resp.ToolCalls) == 0 {
		l.res.VisibleText = ""
	}
	return l.stage(&sessions.Change{Append: []message.Message{msg}})
}

// StripSentinel removes the done sentinel from text, dropping lines left
// empty by it.
func StripSentinel(text string) string {
	if !strings.Contains(text, DoneSentinel) {
		return text
	}
	var kept []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, DoneSentinel) {
			line = strings.ReplaceAll(line, DoneSentinel, "")
			if strings.TrimSpace(line) == "" {
				continue
			}
		}
		kept = append(kept, line)
	}
	return strings.TrimRight(strings.Join(kept, "\n"), "\n ")
}

// logToolCalls stages a tool_call event for each call of a reply, with
// the reply: they are committed, and delivered, before the first tool
// runs.
func (l *loop) logToolCalls(calls []message.ToolCall) error {
	events := make([]sessions.Event, len(calls))
	for i, call := range calls {
		events[i] = sessions.NewEvent(EventToolCall, map[string]any{"name": call.Name, "arguments": jsonvalue.CloneObject(call.Arguments)})
		events[i].CorrID = call.ID
	}
	return l.stage(&sessions.Change{Events: events})
}

// runTool runs one tool call and stages its result.
func (l *loop) runTool(call message.ToolCall) error {
	l.res.ToolCalls = append(l.res.ToolCalls, call.Name)
	if l.cfg.Hooks.ToolCalled != nil {
		l.cfg.Hooks.ToolCalled(call.Name)
	}
	if err := l.setState(StateToolExecuting, &call); err != nil {
		return err
	}
	started, ranFrom := l.clock(), time.Now()
	tctx, span := telemetry.Tool(l.ctx, call.Name, call.ID)
	if span.CaptureContent() {
		span.SetContent(telemetry.KeyToolArguments, telemetry.JSON(map[string]any(call.Arguments)))
	}
	output, blocks, toolErr := l.invoke(tctx, call)
	if toolErr == nil {
		span.SetContent(telemetry.KeyToolResult, output)
	}
	span.End(toolErr, toolErrorType(toolErr))
	if l.ran == nil {
		l.ran = map[string]time.Duration{}
	}
	l.ran[call.Name] = time.Since(ranFrom)
	if l.ctx.Err() != nil {
		return l.ctx.Err()
	}
	var raised error
	if toolErr != nil {
		var bad *badCall
		var te *ToolError
		switch {
		case errors.As(toolErr, &te):
			if te.Fatal {
				raised = toolErr
			}
		case l.cfg.ToolErrors == ToolErrorsRaise && !errors.As(toolErr, &bad):
			raised = toolErr
		}
		output, blocks = toolErr.Error(), nil
	} else {
		var err error
		if output, blocks, err = l.shortenContent(call.Name, output, blocks); err != nil {
			return err
		}
	}
	if err := l.refused(call, toolErr); err != nil {
		return err
	}
	status := "ok"
	data := map[string]any{"name": call.Name, "duration_ms": l.clock().Sub(started).Milliseconds()}
	if toolErr != nil {
		status = "error"
		data["error"] = toolErr.Error()
		l.res.Failed = append(l.res.Failed, call.Name)
	} else {
		l.res.Succeeded = append(l.res.Succeeded, call.Name)
	}
	if l.cfg.Hooks.ToolEnded != nil {
		l.cfg.Hooks.ToolEnded(call.Name, toolErr != nil)
	}
	data["status"] = status
	result := message.Message{Role: message.RoleTool, ToolCallID: call.ID, Name: call.Name, Text: output, Blocks: blocks, IsError: toolErr != nil}
	ev := sessions.NewEvent(EventToolResult, data)
	ev.CorrID = call.ID
	if err := l.stage(&sessions.Change{Append: []message.Message{result}, Events: []sessions.Event{ev}}); err != nil {
		return err
	}
	// A raised error ends the loop with the tool's own result stored: the
	// calls after it are healed ("interrupted").
	return raised
}

// Refusal is implemented by an error that refuses an action because of a
// rule: the workspace policy's refusals, a declined approval
// (RefusedError). A tool call failing with one is logged as a
// security_decision event before its result.
type Refusal interface {
	// Refusal returns what was refused ("exec rm", "read /etc/passwd",
	// "call write_file") and the rule that refused it.
	Refusal() (action, rule string)
}

// RefusedError is a refusal by a rule that is not the workspace policy's,
// such as a declined approval.
type RefusedError struct {
	Action, Rule string
	Err          error
}

func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RefusedError) Unwrap() error { return e.Err }

// Refusal returns Action and Rule.
func (e *RefusedError) Refusal() (action, rule string) { return e.Action, e.Rule }

// refused stages a security_decision event when err refuses call.
func (l *loop) refused(call message.ToolCall, err error) error {
	var ref Refusal
	if err == nil || !errors.As(err, &ref) {
		return nil
	}
	action, rule := ref.Refusal()
	ev := sessions.NewEvent(EventSecurityDecision, map[string]any{"decision": "deny", "action": action, "rule": rule,
		"reason": err.Error(), "tool": call.Name})
	ev.CorrID = call.ID
	return l.stage(&sessions.Change{Events: []sessions.Event{ev}})
}

// ToolError is an error a tool returns to decide how the loop treats it,
// whatever Config.ToolErrors says. With Fatal false it always becomes an
// error result the model sees: use it for failures that are the model's
// doing, such as a path the workspace policy refuses. With Fatal true it
// always stops the loop: use it for a mistake of the script that must not
// go unnoticed, such as a tool returning a secret.
type ToolError struct {
	Err   error
	Fatal bool
}

func (e *ToolError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ToolError) Unwrap() error { return e.Err }

// badCall is an error in the model's call (unknown tool, invalid
// arguments): always reported to the model, never raised.
type badCall struct{ msg string }

func (e *badCall) Error() string { return e.msg }

// toolErrorType is an execute_tool span's error.type: "refused" for a
// refusal by a rule, "invalid_call" for the model's mistake, else "".
func toolErrorType(err error) string {
	var ref Refusal
	var bad *badCall
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ref):
		return "refused"
	case errors.As(err, &bad):
		return "invalid_call"
	}
	return ""
}

// invoke runs a call under ctx (its execute_tool span's): its result
// text, or its blocks when they hold more than text (a ContentTool's
// images).
func (l *loop) invoke(ctx context.Context, call message.ToolCall) (string, []message.Block, error) {
	var tool Tool
	names := make([]string, 0, len(l.cfg.Tools))
	for _, t := range l.cfg.Tools {
		spec := t.Spec()
		names = append(names, spec.Name)
		if spec.Name == call.Name {
			tool = t
		}
	}
	if tool == nil {
		return "", nil, &badCall{fmt.Sprintf("unknown tool '%s' (available: %s)", call.Name, strings.Join(names, ", "))}
	}
	sch, err := l.argsSchema(tool)
	if err != nil {
		return "", nil, err
	}
	if sch != nil {
		if err := sch.Validate("arguments", call.Arguments); err != nil {
			return "", nil, &badCall{fmt.Sprintf("invalid arguments for tool %s: %v", call.Name, err)}
		}
	}
	if slices.Contains(l.cfg.Approve, call.Name) {
		if err := l.approve(call); err != nil {
			return "", nil, err
		}
	}
	if ct, ok := tool.(ContentTool); ok {
		return l.runContent(ctx, ct, call)
	}
	out, err := tool.Run(ctx, call)
	return out, nil, err
}

// turnStart is a turn_start event's data: the iteration, and what the
// request will carry: system (the system prompt sent), tools (their
// names) and estimated_tokens (messages, system prompt and tool specs),
// so a log shows exactly what the model saw.
func (l *loop) turnStart(iteration int64) (map[string]any, error) {
	if l.toolNames == nil {
		l.toolNames = make([]any, len(l.cfg.Tools))
		l.toolTokens = 0
		for i, t := range l.cfg.Tools {
			spec := t.Spec()
			l.toolNames[i] = spec.Name
			l.toolTokens += compact.EstimateText(spec.Name) + compact.EstimateText(spec.Description) + schemaTokens(spec.Parameters)
		}
		l.systemTokens = compact.EstimateText(l.cfg.System)
	}
	msgs, err := l.cfg.Store.Messages(l.ctx, l.cfg.SessionID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"iteration": iteration, "system": l.cfg.System, "tools": l.toolNames,
		"estimated_tokens": int64(l.estimate(msgs) + l.systemTokens + l.toolTokens)}, nil
}

// schemaTokens estimates a tool schema's tokens from its JSON.
func schemaTokens(schema map[string]any) int {
	b, err := jsonvalue.Encode(schema)
	if err != nil {
		return 0
	}
	return compact.EstimateText(string(b))
}

// EventApproval records the approval asked for a tool named in
// Config.Approve: {tool, approved}.
const EventApproval = "approval"

// approve asks Config.Approval about a call of a tool that needs
// approval (no callback refuses) and logs the answer; a refusal is the
// call's error result "NAME: the call was not approved".
func (l *loop) approve(call message.ToolCall) error {
	ok := false
	if l.cfg.Approval != nil {
		var err error
		if ok, err = l.cfg.Approval(call.Name, call.Arguments); err != nil {
			return &ToolError{Err: err, Fatal: true}
		}
	}
	ev := sessions.NewEvent(EventApproval, map[string]any{"tool": call.Name, "approved": ok})
	ev.CorrID = call.ID
	if err := l.stage(&sessions.Change{Events: []sessions.Event{ev}}); err != nil {
		return &ToolError{Err: err, Fatal: true}
	}
	if !ok {
		return &ToolError{Err: &RefusedError{Action: "call " + call.Name, Rule: "approve", Err: fmt.Errorf("%s: the call was not approved", call.Name)}}
	}
	return nil
}
