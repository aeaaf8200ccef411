package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/anthropic"
	"github.com/skein-dev/skein/sessions/message"
)

// A streamed call (to a stand-in server on the loopback interface).
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\n"+`data: {"type":"message_start","message":{"model":"claude-haiku-4-5","content":[],"usage":{"input_tokens":5,"output_tokens":1}}}`+"\n\n"+
			"event: content_block_start\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n"+
			"event: content_block_delta\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello,"}}`+"\n\n"+
			"event: content_block_delta\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" world"}}`+"\n\n"+
			"event: content_block_stop\n"+`data: {"type":"content_block_stop","index":0}`+"\n\n"+
			"event: message_delta\n"+`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`+"\n\n"+
			"event: message_stop\n"+`data: {"type":"message_stop"}`+"\n\n")
	}))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-test-not-a-real-key"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := p.Complete(context.Background(), &llm.Request{
		Model:    "claude-haiku-4-5",
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
