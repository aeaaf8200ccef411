package agent

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
)

// turnCompletedOf returns the data of the session's session:turn_completed
// events, oldest first.
func turnCompletedOf(t *testing.T, store *sessions.Store, id string) []map[string]any {
	t.Helper()
	rec, err := store.Snapshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range rec.Events {
		if e.Type == EventTurnCompleted {
			out = append(out, e.Data)
		}
	}
	return out
}

// TestTurnCompleted checks the session:turn_completed event of every way
// a loop ends: its stopReason, and error.code for the turn cap and the
// max_iterations guard (both turn_limit), a cost cap and a failure.
func TestTurnCompleted(t *testing.T) {
	errResp := func(code, msg string) map[string]any {
		return map[string]any{"stopReason": "error", "error": map[string]any{"code": code, "message": msg}}
	}
	cases := []struct {
		name  string
		setup func(cfg *Config, store *sessions.Store)
		resps []any
		ctx   func() (context.Context, context.CancelFunc)
		want  map[string]any
	}{
		{name: "end_turn", resps: []any{&llm.Response{Text: "hi"}},
			want: map[string]any{"stopReason": "end_turn", "status": "done"}},
		{name: "max_iterations", setup: func(cfg *Config, _ *sessions.Store) { cfg.MaxIterations = 1 },
			resps: []any{callTool("count", map[string]any{"n": int64(1)})},
			want:  with(errResp("turn_limit", "the loop made max_iterations (1) model calls"), "status", "budget_exhausted")},
		{name: "turn_cap", setup: func(cfg *Config, store *sessions.Store) {
			cfg.MaxTurns = 1
			if _, err := store.Apply(context.Background(), cfg.SessionID, &sessions.Change{AddTurns: 1}); err != nil {
				panic(err)
			}
		}, want: with(errResp("turn_limit", "session 's' reached its turn cap of 1 (turn_limit)"), "status", "turn_limit")},
		{name: "provider_error", resps: []any{&llm.Error{Category: llm.Auth, Provider: "fake", Message: "bad key"}},
			want: with(errResp("auth", (&llm.Error{Category: llm.Auth, Provider: "fake", Message: "bad key"}).Error()), "status", "failed")},
		{name: "raised_tool_error", setup: func(cfg *Config, _ *sessions.Store) { cfg.ToolErrors = ToolErrorsRaise },
			resps: []any{callTool("broken", nil)},
			want:  with(errResp("failed", "it broke"), "status", "failed")},
		{name: "cancelled", ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, want: map[string]any{"stopReason": "cancelled"}},
		{name: "timeout", setup: func(cfg *Config, _ *sessions.Store) { cfg.Timeout = time.Nanosecond },
			want: map[string]any{"stopReason": "cancelled", "status": "timeout"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := newStore(t, "s")
			p := &scripted{name: "fake", resps: c.resps}
			cfg := config(store, "s", p, &fakeTool{name: "count", out: "1"}, &fakeTool{name: "broken", err: errors.New("it broke")})
			if c.setup != nil {
				c.setup(&cfg, store)
			}
			ctx := context.Background()
			if c.ctx != nil {
				var cancel context.CancelFunc
				ctx, cancel = c.ctx()
				defer cancel()
			}
			_, _ = Run(ctx, cfg)
			got := turnCompletedOf(t, store, "s")
			if len(got) != 1 || !reflect.DeepEqual(got[0], c.want) {
				t.Fatalf("session:turn_completed events = %v, want one %v", got, c.want)
			}
		})
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

// TestCallLogsNoTurnCompleted: a single model call (llm_call) is not a
// turn of the session.
func TestCallLogsNoTurnCompleted(t *testing.T) {
	store := newStore(t, "s")
	if _, _, err := Call(context.Background(), config(store, "s", &scripted{name: "fake"})); err != nil {
		t.Fatal(err)
	}
	if got := turnCompletedOf(t, store, "s"); len(got) != 0 {
		t.Fatalf("session:turn_completed events = %v, want none", got)
	}
}
