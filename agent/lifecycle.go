package agent

import (
	"fmt"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
)

// EventTurnCompleted ends every agent_loop on the session's log, however
// the loop ended (the agent-session specification's lifecycle event,
// logged beside the loop's own ending events): {stopReason, status} and,
// when stopReason is "error", error {code, message}.
const EventTurnCompleted = "session:turn_completed"

// Stop reasons of a session:turn_completed event.
const (
	StopEndTurn   = "end_turn"  // the model ended its turn (or a callback stopped the loop)
	StopCancelled = "cancelled" // the run was cancelled, or the loop's own timeout passed
	StopError     = "error"     // the loop failed, or a limit stopped it (error.code says which)
)

// Error codes of a session:turn_completed event whose stopReason is
// "error", besides a provider error's category (auth, rate_limit, ...).
const (
	// CodeTurnLimit: the session's turn cap refused the loop, or the loop
	// made max_iterations model calls.
	CodeTurnLimit = "turn_limit"
	CodeCostLimit = "cost_limit" // the next call would have passed a cost cap
	CodeFailed    = "failed"     // any other failure (a tool in raise mode, a callback, ...)
)

// turnCompleted is the session:turn_completed event of a loop that ended
// with status st ("": none, a cancelled loop): with code "" its
// stopReason is stop, else "error".
func turnCompleted(stop string, st Status, code, message string) sessions.Event {
	data := map[string]any{"stopReason": stop}
	if st != "" {
		data["status"] = string(st)
	}
	if code != "" {
		data["stopReason"] = StopError
		data["error"] = map[string]any{"code": code, "message": message}
	}
	return sessions.NewEvent(EventTurnCompleted, data)
}

// TurnCompleted is a session:turn_completed event of a turn that another
// runtime ran (an external ACP agent): {stopReason} and, when code is
// not "", stopReason "error" and error {code, message}.
func TurnCompleted(stopReason, code, message string) sessions.Event {
	return turnCompleted(stopReason, "", code, message)
}

// completed is the session:turn_completed event of a loop that returned
// without an error: its status says whether a limit stopped it.
func (l *loop) completed() sessions.Event {
	st := l.res.Status
	switch {
	case st == StatusBudgetExhausted && l.costStopped:
		return turnCompleted("", st, CodeCostLimit, "the next model call would have passed the loop's cost cap")
	case st == StatusBudgetExhausted:
		return turnCompleted("", st, CodeTurnLimit, fmt.Sprintf("the loop made max_iterations (%d) model calls", l.cfg.MaxIterations))
	}
	return turnCompleted(StopEndTurn, st, "", "")
}

// failed is the session:turn_completed event of a loop that failed with
// err.
func failed(err error) sessions.Event {
	code := CodeFailed
	if e, ok := llm.AsError(err); ok {
		code = string(e.Category)
	}
	return turnCompleted("", StatusFailed, code, err.Error())
}

// complete stages the session:turn_completed event of a loop that ends
// without an error, once.
func (l *loop) complete() error {
	if l.completedLogged {
		return nil
	}
	l.completedLogged = true
	return l.stage(&sessions.Change{Events: []sessions.Event{l.completed()}})
}

// TurnLimitEvents are the events that record a prompt refused, before
// anything is stored or any model is called, because its session has
// used the turns of its cap (tl): turn_limit {status, max_turns, turns}
// and session:turn_completed {stopReason: "error", error: {code:
// "turn_limit", message}}. The loop logs them, and so does skein serve
// when it refuses such a prompt itself.
func TurnLimitEvents(tl *TurnLimitError, turns int) []sessions.Event {
	ev := sessions.NewEvent(EventTurnLimit, map[string]any{"status": string(StatusTurnLimit), "max_turns": int64(tl.Cap), "turns": int64(turns)})
	return []sessions.Event{ev, turnCompleted("", StatusTurnLimit, CodeTurnLimit, tl.Error())}
}
