package openairesponses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/openaiwire"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// responseObject is a Response: the non-streamed body, or the response of
// a stream's response.completed, response.incomplete or response.failed
// event. Fields not listed are ignored.
type responseObject struct {
	Model             string            `json:"model"`
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	Usage             *openaiwire.Usage `json:"usage"`
	Error             json.RawMessage   `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// outputItem is an output item: a message, a function_call or a reasoning
// item (other types are kept but not read).
type outputItem struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Content   []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	Summary []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// streamEvent is the data of any stream event; which fields are set
// depends on Type.
type streamEvent struct {
	Type        string          `json:"type"`
	OutputIndex int             `json:"output_index"`
	Item        json.RawMessage `json:"item"`     // response.output_item.*
	Delta       string          `json:"delta"`    // *.delta
	Response    *responseObject `json:"response"` // response.*
	// An `error` event: the error's fields at the top level.
	Code    json.RawMessage `json:"code"`
	Message string          `json:"message"`
}

// readResponse reads a non-streamed reply.
func readResponse(body io.Reader) (*llm.Response, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var o responseObject
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, wire.Malformed("reply", err)
	}
	var r reply
	if err := r.finish(&o); err != nil {
		return nil, err
	}
	for _, raw := range o.Output {
		if err := r.addItem(-1, raw); err != nil {
			return nil, err
		}
	}
	return r.response()
}

// readStream reads a streamed reply: events of JSON objects, each naming
// its type, ending with response.completed or response.incomplete (there
// is no [DONE]). Output items are built from response.output_item.added,
// the deltas that follow, and response.output_item.done, which carries the
// whole item; text and reasoning summary deltas go to onDelta as they
// arrive. A stream that ends before its last event is a transient
// `network` error; an error event or response.failed is a categorised
// error.
func readStream(body io.Reader, onDelta func(llm.Delta)) (*llm.Response, error) {
	events := wire.NewEventReader(body, "response.completed")
	var r reply
	var ev streamEvent
	for {
		_, data, err := events.Next()
		if err != nil {
			return nil, err
		}
		ev = streamEvent{}
		if err := json.Unmarshal(data, &ev); err != nil {
			return nil, wire.Malformed("stream event", err)
		}
		switch ev.Type {
		case "response.output_text.delta":
			if b := r.at(ev.OutputIndex); b != nil && ev.Delta != "" {
				b.text.WriteString(ev.Delta)
				if onDelta != nil {
					onDelta(llm.Delta{Text: ev.Delta})
				}
			}
		case "response.refusal.delta":
			if b := r.at(ev.OutputIndex); b != nil {
				b.refusal.WriteString(ev.Delta)
			}
		case "response.function_call_arguments.delta":
			if b := r.at(ev.OutputIndex); b != nil {
				b.args.WriteString(ev.Delta)
			}
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			if b := r.at(ev.OutputIndex); b != nil && ev.Delta != "" {
				if ev.Type == "response.reasoning_summary_text.delta" {
					b.summary.WriteString(ev.Delta)
				}
				if onDelta != nil {
					onDelta(llm.Delta{Thinking: ev.Delta})
				}
			}
		case "response.output_item.added":
			if b := r.at(ev.OutputIndex); b != nil {
				b.start(ev.Item)
			}
		case "response.output_item.done":
			if err := r.addItem(ev.OutputIndex, ev.Item); err != nil {
				return nil, err
			}
		case "response.completed", "response.incomplete", "response.failed":
			if ev.Response == nil {
				return nil, &llm.Error{Category: llm.ServerError, Message: ev.Type + " without its response"}
			}
			if err := r.finish(ev.Response); err != nil {
				return nil, err
			}
			if len(r.items) == 0 {
				// A server that sent no item events: the final response
				// carries them all.
				for _, raw := range ev.Response.Output {
					if err := r.addItem(-1, raw); err != nil {
						return nil, err
					}
				}
			}
			return r.response()
		case "error":
			e := map[string]any{"message": ev.Message, "code": ev.Code}
			raw, _ := json.Marshal(e)
			return nil, openaiwire.ReplyError(raw)
		}
	}
}

// maxItems bounds the output index a stream may use.
const maxItems = 1 << 12

// reply accumulates a reply from its output items.
type reply struct {
	model  string
	status string
	reason string // incomplete_details.reason
	usage  llm.Usage
	items  []*itemBuilder
}

// itemBuilder is one output item: whole (raw) once it is done, and until
// then the pieces its deltas brought.
type itemBuilder struct {
	raw     json.RawMessage // the whole item, compacted
	item    outputItem
	text    strings.Builder
	refusal strings.Builder
	args    strings.Builder
	summary strings.Builder
}

// at returns the builder of output index i, creating it; nil for an index
// out of range.
func (r *reply) at(i int) *itemBuilder {
	if i < 0 || i >= maxItems {
		return nil
	}
	for len(r.items) <= i {
		r.items = append(r.items, nil)
	}
	if r.items[i] == nil {
		r.items[i] = &itemBuilder{}
	}
	return r.items[i]
}

// start records the item of response.output_item.added (its type, call
// id and name; its content comes in deltas).
func (b *itemBuilder) start(raw json.RawMessage) {
	json.Unmarshal(raw, &b.item)
}

// addItem records a whole item at output index i (-1: the next one).
func (r *reply) addItem(i int, raw json.RawMessage) error {
	if i < 0 {
		i = len(r.items)
	}
	b := r.at(i)
	if b == nil {
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return wire.Malformed("output item", err)
	}
	var item outputItem
	if err := json.Unmarshal(compact.Bytes(), &item); err != nil {
		return wire.Malformed("output item", err)
	}
	*b = itemBuilder{raw: compact.Bytes(), item: item}
	return nil
}

// finish takes in the final response object: model, status, usage, and
// the failure of a failed response.
func (r *reply) finish(o *responseObject) error {
	if len(o.Error) > 0 && string(o.Error) != "null" {
		return openaiwire.ReplyError(o.Error)
	}
	if o.Status == "failed" {
		return &llm.Error{Category: llm.ServerError, Message: "the response failed without an error"}
	}
	r.model, r.status = o.Model, o.Status
	if o.IncompleteDetails != nil {
		r.reason = o.IncompleteDetails.Reason
	}
	if o.Usage != nil {
		r.usage = o.Usage.LLM()
	}
	return nil
}

// response assembles the reply. Text is the output_text of the message
// items (their refusal when there is none), tool calls are the
// function_call items; when any item is reasoning, every output item is
// kept, byte for byte, in one thinking block (origin Name) whose text is
// the reasoning summary, so that the next request can send them back.
func (r *reply) response() (*llm.Response, error) {
	resp := &llm.Response{Model: r.model, Usage: r.usage}
	var text, refusal, summary strings.Builder
	reasoned := false
	var kept [][]byte
	for _, b := range r.items {
		if b == nil {
			continue
		}
		it := &b.item
		switch it.Type {
		case "message":
			if b.raw == nil {
				text.WriteString(b.text.String())
				refusal.WriteString(b.refusal.String())
			}
			for _, c := range it.Content {
				text.WriteString(c.Text)
				refusal.WriteString(c.Refusal)
			}
		case "function_call":
			args := it.Arguments
			if b.raw == nil {
				args = b.args.String()
			}
			resp.ToolCalls = append(resp.ToolCalls, message.ToolCall{ID: it.CallID, Name: it.Name, Arguments: wire.DecodeArguments(args)})
		case "reasoning":
			reasoned = true
			s := b.summary.String()
			if b.raw != nil {
				var parts []string
				for _, p := range it.Summary {
					parts = append(parts, p.Text)
				}
				s = strings.Join(parts, "\n\n")
			}
			if s != "" {
				if summary.Len() > 0 {
					summary.WriteString("\n\n")
				}
				summary.WriteString(s)
			}
		}
		raw, err := b.whole()
		if err != nil {
			return nil, err
		}
		kept = append(kept, raw)
	}
	resp.Text = text.String()
	if resp.Text == "" {
		resp.Text = refusal.String()
	}
	for i, c := range resp.ToolCalls {
		if c.ID == "" {
			resp.ToolCalls[i].ID = fmt.Sprintf("call_%d", i+1)
		}
	}
	if reasoned {
		// Joined by hand: json.Marshal would HTML-escape the items.
		data := "[" + string(bytes.Join(kept, []byte(","))) + "]"
		resp.Thinking = []message.Block{{Type: message.BlockThinking, Thinking: summary.String(), Origin: Name, Data: data}}
	}
	resp.StopReason = stopReason(r.status, r.reason, len(resp.ToolCalls) > 0)
	return resp, nil
}

// whole returns the item as JSON: as it came when it came whole, else
// built from its pieces (a server that never sent output_item.done).
func (b *itemBuilder) whole() (json.RawMessage, error) {
	if b.raw != nil {
		return b.raw, nil
	}
	it := &b.item
	var v any
	switch it.Type {
	case "message":
		v = map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": b.text.String()}}}
	case "function_call":
		v = functionCall{Type: "function_call", CallID: it.CallID, Name: it.Name, Arguments: b.args.String()}
	case "reasoning":
		v = map[string]any{"type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": b.summary.String()}}}
	default:
		v = map[string]any{"type": it.Type}
	}
	return json.Marshal(v)
}

// stopReason maps the response's status: completed → end_turn (tool_use
// when it calls tools); incomplete for max_output_tokens → max_tokens;
// other incomplete reasons (content_filter) are kept as they are.
func stopReason(status, reason string, hasCalls bool) string {
	if status == "incomplete" {
		if reason == "max_output_tokens" {
			return llm.StopMaxTokens
		}
		if reason != "" {
			return reason
		}
		return llm.StopMaxTokens
	}
	if hasCalls {
		return llm.StopToolUse
	}
	return llm.StopEnd
}
