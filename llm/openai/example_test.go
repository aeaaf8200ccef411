package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/openai"
	"github.com/skein-dev/skein/sessions/message"
)

// A streamed call to an OpenAI-compatible server (here a stand-in on the
// loopback interface).
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"model":"local-model","choices":[{"index":0,"delta":{"content":"Hello,"}}]}`+"\n\n"+
			`data: {"model":"local-model","choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}]}`+"\n\n"+
			`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}`+"\n\n"+
			"data: [DONE]\n\n")
	}))
	defer srv.Close()

	p, err := openai.New(openai.Config{Name: "openai_compatible", BaseURL: srv.URL + "/v1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := p.Complete(context.Background(), &llm.Request{
		Model:    "local-model",
		Messages: []message.Message{{Role: message.RoleUser, Text: "Greet the world."}},
		Stream:   true,
		OnDelta:  func(d llm.Delta) { fmt.Print(d.Text) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println()
	fmt.Println(resp.StopReason, resp.Usage.InputTokens, resp.Usage.OutputTokens)
	// Output:
	// Hello, world
	// end_turn 5 3
}
