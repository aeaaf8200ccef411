package wiretest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// Protocol adapts one wire protocol's client to the conformance suite
// (Run): how to make a client for a loopback server, and the server's
// side of each case, as fixture files in the protocol's real wire format
// (in testdata/: a .sse file is a 200 event stream, any other a 200 JSON
// body) with what the client must make of them.
type Protocol struct {
	// Name is the provider name replies and errors carry.
	Name string
	// Model is the model the suite's requests ask for.
	Model string
	// Key is an obviously fake API key; the suite checks that it is sent
	// in a header only and never appears in a body, a URL or an error.
	Key string
	// New returns a client of the server at base (the server's root URL;
	// the adapter adds whatever path prefix the protocol has) sending key,
	// with the given per-call timeout.
	New func(base, key string, timeout time.Duration) (llm.Provider, error)

	// Plain is a whole (non-streamed) reply of text; it also answers the
	// second request of the tool and thinking cases.
	Plain Case
	// Stream is a streamed reply of the text "Hello there! Ça va?" in at
	// least two deltas, ending the turn.
	Stream Case
	// ToolCall is a streamed reply calling get_weather once with the
	// arguments {"location": "Paris, France", "days": 2}, sent in pieces
	// where the protocol streams them (Gemini sends each call whole).
	ToolCall Case
	// Parallel is a streamed reply calling, in this order, get_weather
	// {"location": "Paris"}, get_weather {"location": "Tokyo"} and
	// get_time {"zone": "UTC"}, their arguments interleaved where the
	// protocol streams them.
	Parallel Case
	// Thinking is a streamed reply that reasons (thinking deltas) before
	// answering or calling tools; Kept lists what the next request must
	// send back byte for byte.
	Thinking Case
	// Structured is a whole reply to a request for structured output
	// (StructuredOutput): the text {"city":"Paris","country":"France",
	// "population_millions":2.1}. The request is compared with the golden
	// file testdata/suite_structured_request.golden.json, which holds the
	// protocol's native form of the schema.
	Structured Case

	// Errors is an error response for every category a server reports
	// with an HTTP status (all but network). The suite adds a retry-after
	// header to each.
	Errors map[llm.Category]Reply
	// MidStream is a stream that breaks off with an error event of
	// category MidStreamCategory.
	MidStream         string
	MidStreamCategory llm.Category
	// Truncated is a stream that ends before its last event.
	Truncated string
	// KeyEchoed returns error replies in the protocol's formats that carry
	// key (an error body, a mid-stream error), as a server repeating a
	// rejected key might.
	KeyEchoed func(key string) []Reply
}

// Case is a fixture and what the client must read from it.
type Case struct {
	File  string    // in testdata/
	Text  string    // the reply's text
	Model string    // the model the reply names
	Usage llm.Usage // the reply's usage
	// Kept (Thinking only) are fragments of the reply that the next
	// request must carry exactly as they came (signatures, encrypted
	// reasoning).
	Kept []string
}

// reply returns the fixture as a 200 reply.
func (c Case) reply(t *testing.T) Reply {
	return fixture(t, c.File)
}

func fixture(t *testing.T, file string) Reply {
	t.Helper()
	body := Read(t, filepath.Join("testdata", file))
	if strings.HasSuffix(file, ".sse") {
		return SSE(body)
	}
	return JSON(200, body)
}

// WeatherTool and TimeTool are the tools of the suite's requests.
var (
	WeatherTool = llm.ToolSpec{
		Name:        "get_weather",
		Description: "Current weather and forecast for a place.",
		Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"location": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}},
			"required":   []any{"location"},
		},
	}
	TimeTool = llm.ToolSpec{Name: "get_time", Description: "The time in a zone.",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}}}
)

// User returns a user message of text.
func User(text string) message.Message { return message.Message{Role: message.RoleUser, Text: text} }

// Run runs every case of the conformance suite against p's client. The
// request bodies of the cases that send a conversation back are compared
// with golden files testdata/suite_*_request.golden.json (rewritten by
// -update).
func Run(t *testing.T, p Protocol) {
	t.Run("plain", func(t *testing.T) { plain(t, &p) })
	t.Run("stream", func(t *testing.T) { stream(t, &p) })
	t.Run("tool_call", func(t *testing.T) { toolCall(t, &p) })
	t.Run("parallel_tool_calls", func(t *testing.T) { parallel(t, &p) })
	t.Run("thinking_round_trip", func(t *testing.T) { thinking(t, &p) })
	t.Run("structured_output", func(t *testing.T) { structured(t, &p) })
	t.Run("errors", func(t *testing.T) { errorCategories(t, &p) })
	t.Run("retry_after_then_success", func(t *testing.T) { retryThenSuccess(t, &p) })
	t.Run("cancel_mid_stream", func(t *testing.T) { cancelMidStream(t, &p) })
	t.Run("timeout", func(t *testing.T) { timeout(t, &p) })
	t.Run("key_never_in_errors", func(t *testing.T) { keyNeverInErrors(t, &p) })
}

// client returns p's client of srv.
func (p *Protocol) client(t *testing.T, srv *Server, timeout time.Duration) llm.Provider {
	t.Helper()
	c, err := p.New(srv.URL, p.Key, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != p.Name {
		t.Errorf("the client is named %q, want %q", c.Name(), p.Name)
	}
	return c
}

// checkSent checks what a request carried: the Accept header a stream or
// a whole reply needs, and the key in a header only.
func (p *Protocol) checkSent(t *testing.T, r Request, stream bool) {
	t.Helper()
	accept := "application/json"
	if stream {
		accept = "text/event-stream"
	}
	if r.Method != "POST" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != accept {
		t.Errorf("request %s %s with Content-Type %q, Accept %q; want POST, application/json, %s", r.Method, r.URL, r.Header.Get("Content-Type"), r.Header.Get("Accept"), accept)
	}
	if strings.Contains(r.URL, p.Key) || strings.Contains(string(r.Body), p.Key) {
		t.Errorf("the key is in the request's URL or body: %s %s", r.URL, r.Body)
	}
	inHeader := false
	for _, vs := range r.Header {
		for _, v := range vs {
			inHeader = inHeader || strings.Contains(v, p.Key)
		}
	}
	if !inHeader {
		t.Errorf("the key is in no header: %v", r.Header)
	}
}

// checkReply checks the fields of a reply that every case fixes.
func (p *Protocol) checkReply(t *testing.T, c Case, resp *llm.Response, stop string) {
	t.Helper()
	if resp.Text != c.Text || resp.Model != c.Model || resp.Usage != c.Usage || resp.StopReason != stop || resp.Provider != p.Name {
		t.Errorf("got text %q, model %q, usage %+v, stop %q, provider %q\nwant text %q, model %q, usage %+v, stop %q, provider %q",
			resp.Text, resp.Model, resp.Usage, resp.StopReason, resp.Provider, c.Text, c.Model, c.Usage, stop, p.Name)
	}
}

func plain(t *testing.T, p *Protocol) {
	srv := NewServer(t, p.Plain.reply(t))
	resp, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}})
	if err != nil {
		t.Fatal(err)
	}
	p.checkReply(t, p.Plain, resp, llm.StopEnd)
	if resp.ToolCalls != nil {
		t.Errorf("tool calls %+v", resp.ToolCalls)
	}
	p.checkSent(t, srv.Requests()[0], false)
}

func stream(t *testing.T, p *Protocol) {
	srv := NewServer(t, p.Stream.reply(t))
	var deltas []string
	temp := 0.5
	resp, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{
		Model: p.Model, System: "You are terse.", Messages: []message.Message{User("Say hello.")},
		MaxTokens: 100, Stop: []string{"END"}, Temperature: &temp, Stream: true,
		OnDelta: func(d llm.Delta) { deltas = append(deltas, d.Text) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Stream.Text != "Hello there! Ça va?" {
		t.Errorf("the fixture's text is %q, want %q", p.Stream.Text, "Hello there! Ça va?")
	}
	p.checkReply(t, p.Stream, resp, llm.StopEnd)
	if len(deltas) < 2 || strings.Join(deltas, "") != resp.Text {
		t.Errorf("deltas %q do not stream the text %q", deltas, resp.Text)
	}
	r := srv.Requests()[0]
	p.checkSent(t, r, true)
	Golden(t, "testdata/suite_stream_request.golden.json", r.Body)
}

// toolCall: a call whose arguments arrive in pieces, then the call and its
// result sent back.
func toolCall(t *testing.T, p *Protocol) {
	srv := NewServer(t, p.ToolCall.reply(t), p.Plain.reply(t))
	c := p.client(t, srv, 0)
	req := &llm.Request{Model: p.Model, System: "Use tools when they help.", Messages: []message.Message{User("Weather in Paris for two days?")},
		Tools: []llm.ToolSpec{WeatherTool}, ToolChoice: "auto", Stream: true}
	first, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	p.checkReply(t, p.ToolCall, first, llm.StopToolUse)
	checkCalls(t, first.ToolCalls, []message.ToolCall{{Name: "get_weather", Arguments: map[string]any{"location": "Paris, France", "days": int64(2)}}})
	if len(first.ToolCalls) != 1 {
		return
	}
	req.Messages = append(req.Messages,
		message.Message{Role: message.RoleAssistant, Text: first.Text, ToolCalls: first.ToolCalls},
		message.Message{Role: message.RoleTool, ToolCallID: first.ToolCalls[0].ID, Name: "get_weather", Text: `{"today":"sunny, 21 °C"}`})
	req.Stream = false
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[1]
	p.checkSent(t, r, false)
	Golden(t, "testdata/suite_tool_call_request.golden.json", r.Body)
}

// checkCalls compares tool calls but for their ids, which must be set and
// distinct.
func checkCalls(t *testing.T, got, want []message.ToolCall) {
	t.Helper()
	ids := map[string]bool{}
	var stripped []message.ToolCall
	for _, c := range got {
		if c.ID == "" || ids[c.ID] {
			t.Errorf("tool call ids must be set and distinct: %+v", got)
		}
		ids[c.ID] = true
		c.ID = ""
		stripped = append(stripped, c)
	}
	if !reflect.DeepEqual(stripped, want) {
		t.Errorf("tool calls %+v, want %+v", got, want)
	}
}

// parallel: three calls in one reply, then their results (one failed, one
// without the tool's name) and a user message sent back.
func parallel(t *testing.T, p *Protocol) {
	srv := NewServer(t, p.Parallel.reply(t), p.Plain.reply(t))
	c := p.client(t, srv, 0)
	req := &llm.Request{Model: p.Model, Messages: []message.Message{User("Weather in Paris and Tokyo, and the time?")},
		Tools: []llm.ToolSpec{WeatherTool, TimeTool}, Stream: true}
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	p.checkReply(t, p.Parallel, resp, llm.StopToolUse)
	checkCalls(t, resp.ToolCalls, []message.ToolCall{
		{Name: "get_weather", Arguments: map[string]any{"location": "Paris"}},
		{Name: "get_weather", Arguments: map[string]any{"location": "Tokyo"}},
		{Name: "get_time", Arguments: map[string]any{"zone": "UTC"}},
	})
	if len(resp.ToolCalls) != 3 {
		return
	}
	calls := resp.ToolCalls
	req.Messages = append(req.Messages,
		message.Message{Role: message.RoleAssistant, ToolCalls: calls},
		message.Message{Role: message.RoleTool, ToolCallID: calls[0].ID, Name: "get_weather", Text: "sunny"},
		message.Message{Role: message.RoleTool, ToolCallID: calls[1].ID, Text: "rain"},
		message.Message{Role: message.RoleTool, ToolCallID: calls[2].ID, Name: "get_time", Text: "no clock available", IsError: true},
		User("Also, keep it short."))
	req.Stream = false
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	Golden(t, "testdata/suite_parallel_request.golden.json", srv.Requests()[1].Body)
}

// thinking: the reasoning streams as thinking deltas and is kept in
// thinking blocks, which go back (through a store's JSON form) with the
// next request exactly as the API needs them.
func thinking(t *testing.T, p *Protocol) {
	srv := NewServer(t, p.Thinking.reply(t), p.Plain.reply(t))
	c := p.client(t, srv, 0)
	var thought strings.Builder
	req := &llm.Request{Model: p.Model, Messages: []message.Message{User("Weather in Paris?")}, Tools: []llm.ToolSpec{WeatherTool},
		Thinking: &llm.Thinking{BudgetTokens: 2048}, Stream: true, OnDelta: func(d llm.Delta) { thought.WriteString(d.Thinking) }}
	first, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	stop := llm.StopEnd
	if len(first.ToolCalls) > 0 {
		stop = llm.StopToolUse
	}
	p.checkReply(t, p.Thinking, first, stop)
	var kept strings.Builder
	for _, b := range first.Thinking {
		if b.Type == message.BlockThinking {
			kept.WriteString(b.Thinking)
		}
	}
	if thought.Len() == 0 || len(first.Thinking) == 0 {
		t.Errorf("no thinking deltas or no thinking kept: %+v", first)
	}
	if thought.String() != kept.String() {
		t.Errorf("thinking deltas %q, thinking kept %q", thought.String(), kept.String())
	}
	msg := message.Message{Role: message.RoleAssistant, Text: first.Text, ToolCalls: first.ToolCalls}
	if first.Thinking != nil {
		msg.Text, msg.Blocks = "", append(first.Thinking, message.Block{Type: message.BlockText, Text: first.Text})
	}
	data, err := msg.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var stored message.Message
	if err := stored.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	req.Messages = append(req.Messages, stored)
	for _, call := range first.ToolCalls {
		req.Messages = append(req.Messages, message.Message{Role: message.RoleTool, ToolCallID: call.ID, Name: call.Name, Text: "sunny"})
	}
	req.Messages = append(req.Messages, User("And tomorrow?"))
	req.Stream, req.OnDelta = false, nil
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	body := string(srv.Requests()[1].Body)
	for _, k := range p.Thinking.Kept {
		if !strings.Contains(Read(t, filepath.Join("testdata", p.Thinking.File)), k) {
			t.Errorf("%q is not in the fixture", k)
		}
		if !strings.Contains(body, k) {
			t.Errorf("%q was not sent back unchanged:\n%s", k, body)
		}
	}
	Golden(t, "testdata/suite_thinking_request.golden.json", srv.Requests()[1].Body)
}

// errorCategories: an error response of every category, each with a
// retry-after header, and the network failures.
func errorCategories(t *testing.T, p *Protocol) {
	for _, cat := range llm.Categories {
		if cat == llm.Network {
			continue
		}
		rep, ok := p.Errors[cat]
		if !ok {
			t.Errorf("no error reply of category %s", cat)
			continue
		}
		headers := []struct {
			name, value string
			wait        time.Duration
		}{{"Retry-After", "3", 3 * time.Second}}
		if cat == llm.RateLimit {
			headers = append(headers, struct {
				name, value string
				wait        time.Duration
			}{"Retry-After-Ms", "1500", 1500 * time.Millisecond})
		}
		for _, h := range headers {
			t.Run(string(cat)+"/"+h.name, func(t *testing.T) {
				srv := NewServer(t, rep.With(h.name, h.value))
				_, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}})
				p.checkError(t, err, cat, rep.Status, h.wait)
			})
		}
	}
	streams := []struct {
		name string
		rep  Reply
		cat  llm.Category
	}{
		{"mid-stream error", fixture(t, p.MidStream), p.MidStreamCategory},
		{"truncated stream", fixture(t, p.Truncated), llm.Network},
	}
	for _, s := range streams {
		t.Run(s.name, func(t *testing.T) {
			srv := NewServer(t, s.rep)
			_, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}, Stream: true})
			p.checkError(t, err, s.cat, 0, 0)
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		srv := NewServer(t)
		srv.Close()
		_, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}})
		p.checkError(t, err, llm.Network, 0, 0)
	})
}

// checkError checks that err is an *llm.Error of p, of category cat, with
// the HTTP status and the retry-after wait given, retryable exactly when
// its category is transient.
func (p *Protocol) checkError(t *testing.T, err error, cat llm.Category, status int, wait time.Duration) {
	t.Helper()
	e, ok := llm.AsError(err)
	if !ok {
		t.Fatalf("got %v, want *llm.Error", err)
	}
	if e.Provider != p.Name || e.Category != cat || e.Status != status || e.RetryAfter != wait || e.Retryable() != cat.Transient() || e.Message == "" {
		t.Errorf("got %+v (retryable %v)\nwant provider %s, category %s, status %d, retry after %s", e, e.Retryable(), p.Name, cat, status, wait)
	}
}

// retryThenSuccess: a rate limit's retry-after is the wait of the retry
// policy, and the retry succeeds.
func retryThenSuccess(t *testing.T, p *Protocol) {
	srv := NewServer(t, p.Errors[llm.RateLimit].With("Retry-After", "2"), p.Plain.reply(t))
	c := p.client(t, srv, 0)
	var sleeper Sleeper
	policy := llm.RetryPolicy{Retries: 2, Backoff: 500 * time.Millisecond, Sleep: sleeper.Sleep, Jitter: NoJitter}
	resp, err := policy.Call(context.Background(), func() (*llm.Response, error) {
		return c.Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != p.Plain.Text || !reflect.DeepEqual(sleeper.Waits, []time.Duration{2 * time.Second}) || len(srv.Requests()) != 2 {
		t.Errorf("text %q after waits %v and %d requests; want %q after [2s] and 2", resp.Text, sleeper.Waits, len(srv.Requests()), p.Plain.Text)
	}
}

// cancelMidStream: the stream fixture without its last event, held open;
// cancelling at the first delta returns ctx's error, not a reply or an
// *llm.Error.
func cancelMidStream(t *testing.T, p *Protocol) {
	body := Read(t, filepath.Join("testdata", p.Stream.File))
	sep := "\n\n"
	if strings.Contains(body, "\r\n\r\n") {
		sep = "\r\n\r\n"
	}
	events := strings.SplitAfter(strings.TrimRight(body, "\r\n")+sep, sep)
	events = events[:len(events)-2] // the last element is empty
	srv := NewServer(t, Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: strings.Join(events, ""), Hold: true})
	c := p.client(t, srv, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		resp, err := c.Complete(ctx, &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}, Stream: true,
			OnDelta: func(llm.Delta) { cancel() }})
		if resp != nil {
			err = errors.New("a reply after cancellation")
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("got %v, want context.Canceled", err)
		}
		if _, ok := llm.AsError(err); ok {
			t.Errorf("cancellation reported as *llm.Error: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return after cancellation")
	}
}

// timeout: a reply that stalls past the client's timeout, streamed or
// whole, is a retryable `timeout` error.
func timeout(t *testing.T, p *Protocol) {
	stalls := []struct {
		name   string
		rep    Reply
		stream bool
	}{
		{"stream", Reply{Header: map[string]string{"Content-Type": "text/event-stream"}, Body: ": stalled\n\n", Hold: true}, true},
		{"whole", Reply{Header: map[string]string{"Content-Type": "application/json"}, Body: `{"id":`, Hold: true}, false},
	}
	for _, s := range stalls {
		t.Run(s.name, func(t *testing.T) {
			srv := NewServer(t, s.rep)
			_, err := p.client(t, srv, 100*time.Millisecond).Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}, Stream: s.stream})
			p.checkError(t, err, llm.Timeout, 0, 0)
		})
	}
}

// keyNeverInErrors drives the error paths with servers that send the key
// back: in the protocol's error formats, in pages echoing the request's
// headers, and in the URL of a connection that fails.
func keyNeverInErrors(t *testing.T, p *Protocol) {
	replies := append(p.KeyEchoed(p.Key),
		Reply{Status: 500, Body: "upstream rejected request headers:\n", EchoHeaders: true},
		Reply{Status: 429, Body: "too many: ", EchoHeaders: true})
	for i, rep := range replies {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			srv := NewServer(t, rep)
			stream := strings.HasPrefix(rep.Header["Content-Type"], "text/event-stream")
			_, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}, Stream: stream})
			CheckScrubbed(t, err, p.Key)
		})
	}
	t.Run("key in the base url", func(t *testing.T) {
		c, err := p.New("http://127.0.0.1:1/?key="+p.Key, p.Key, 0)
		if err == nil {
			_, err = c.Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}})
		}
		CheckScrubbed(t, err, p.Key)
	})
}

// ErrorCase is a protocol's own error reply (beyond the suite's: quota
// and billing errors, proxies' pages, retry hints, errors inside a 200
// reply) and the *llm.Error its client must make of it.
type ErrorCase struct {
	Name       string
	Reply      Reply
	Stream     bool // ask for a stream
	Category   llm.Category
	Status     int
	RetryAfter time.Duration
	NoRetry    bool
	Msg        string // a fragment of the error's message
}

// CheckErrors sends each case's reply to p's client and checks the error
// it returns.
func (p Protocol) CheckErrors(t *testing.T, cases []ErrorCase) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			srv := NewServer(t, c.Reply)
			_, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{Model: p.Model, Messages: []message.Message{User("hi")}, Stream: c.Stream})
			e, ok := llm.AsError(err)
			if !ok {
				t.Fatalf("got %v, want *llm.Error", err)
			}
			if e.Provider != p.Name || e.Category != c.Category || e.Status != c.Status || e.RetryAfter != c.RetryAfter || e.NoRetry != c.NoRetry {
				t.Errorf("got %+v", e)
			}
			if !strings.Contains(e.Message, c.Msg) {
				t.Errorf("message %q does not contain %q", e.Message, c.Msg)
			}
			if e.Retryable() != (c.Category.Transient() && !c.NoRetry) {
				t.Errorf("retryable %v", e.Retryable())
			}
		})
	}
}

// StructuredOutput is the schema of the suite's structured-output
// request: strict mode's rules are met, so OpenAI's forms send strict.
var StructuredOutput = llm.Output{Name: "city_facts", Schema: map[string]any{
	"type": "object", "additionalProperties": false,
	"required": []any{"city", "country", "population_millions"},
	"properties": map[string]any{
		"city":                map[string]any{"type": "string"},
		"country":             map[string]any{"type": "string"},
		"population_millions": map[string]any{"type": "number"},
	},
}}

// structured: a request for structured output carries the schema in the
// protocol's native form, and the reply's text is the JSON value.
func structured(t *testing.T, p *Protocol) {
	if p.Structured.File == "" {
		t.Fatal("the protocol has no Structured case")
	}
	srv := NewServer(t, p.Structured.reply(t))
	out := StructuredOutput
	resp, err := p.client(t, srv, 0).Complete(context.Background(), &llm.Request{
		Model: p.Model, System: "Answer with the city's facts.", Messages: []message.Message{User("Tell me about Paris.")}, Output: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"city":"Paris","country":"France","population_millions":2.1}`
	if p.Structured.Text != want {
		t.Errorf("the fixture's text is %q, want %q", p.Structured.Text, want)
	}
	p.checkReply(t, p.Structured, resp, llm.StopEnd)
	r := srv.Requests()[0]
	p.checkSent(t, r, false)
	Golden(t, "testdata/suite_structured_request.golden.json", r.Body)
}
