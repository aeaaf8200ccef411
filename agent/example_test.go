package agent_test

import (
	"context"
	"fmt"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions"
)

// echo is a fake provider: it answers every call with the last user
// message, upper-cased.
type echo struct{}

func (echo) Name() string { return "echo" }

func (echo) Complete(_ context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1].Text
	return &llm.Response{Text: fmt.Sprintf("you said %q", last), StopReason: "end_turn"}, nil
}

// agent.Run with a fake provider: the zero Config fields take their
// defaults (DefaultConfig), and the session keeps the conversation.
func ExampleRun() {
	ctx := context.Background()
	store, err := sessions.NewStore(sessions.NewMemoryBackend())
	if err != nil {
		panic(err)
	}
	if _, err := store.Open(ctx, "s", 0); err != nil {
		panic(err)
	}
	res, err := agent.Run(ctx, agent.Config{
		Store: store, SessionID: "s", Prompt: "hello",
		Chain: []llm.Target{{Provider: echo{}}},
	})
	if err != nil {
		panic(err)
	}
	n, _ := store.Length(ctx, "s")
	fmt.Println(res.Status, res.Text, n)
	// Output: done you said "hello" 2
}
