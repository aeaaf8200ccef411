package gemini

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/internal/wire"
	"github.com/skein-dev/skein/sessions/message"
)

// A GenerateContentResponse: the non-streamed body, or one event of a
// stream. Fields not listed (safetyRatings, citationMetadata, responseId,
// ...) are ignored.
type generateResponse struct {
	Candidates []struct {
		Content struct {
			Parts []part `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
		Index        int    `json:"index"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *usageMetadata  `json:"usageMetadata"`
	ModelVersion  string          `json:"modelVersion"`
	Error         json.RawMessage `json:"error"`
}

type usageMetadata struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount"`
	ThoughtsTokenCount      int `json:"thoughtsTokenCount"`
}

// llm maps the counts: output is candidates plus thoughts (as OpenAI
// counts reasoning), input is the prompt, cached part included.
func (u *usageMetadata) llm() llm.Usage {
	return llm.Usage{
		InputTokens:     u.PromptTokenCount,
		OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CacheReadTokens: u.CachedContentTokenCount,
		ReasoningTokens: u.ThoughtsTokenCount,
	}
}

// readResponse reads a non-streamed reply.
func readResponse(body io.Reader) (*llm.Response, error) {
	data, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var r reply
	if err := r.add(data, nil); err != nil {
		return nil, err
	}
	if r.finish == "" && len(r.parts) == 0 {
		return nil, &llm.Error{Category: llm.ServerError, Message: "the reply has no candidates"}
	}
	return r.response()
}

// readStream reads a streamed reply: `data:` events each holding a
// GenerateContentResponse with the next parts, the last one with a finish
// reason (there is no terminator). Text and thought pieces go to onDelta
// as they arrive. A stream that ends before a finish reason is a transient
// `network` error; an error object in the stream is a categorised error.
func readStream(body io.Reader, onDelta func(llm.Delta)) (*llm.Response, error) {
	events := wire.NewEventReader(body, "")
	var r reply
	for {
		_, data, err := events.Next()
		if err == io.EOF {
			if r.finish == "" {
				return nil, wire.Truncated("a finish reason")
			}
			return r.response()
		}
		if err != nil {
			return nil, err
		}
		if err := r.add(data, onDelta); err != nil {
			return nil, err
		}
	}
}

// reply accumulates a reply from the parts of its first candidate.
type reply struct {
	model  string
	finish string
	usage  llm.Usage
	parts  []part
	tail   strings.Builder // text joined to the last part, not yet in it
	signed bool            // some part carries a thought signature
}

// flush moves the joined text into the last part.
func (r *reply) flush() {
	if r.tail.Len() == 0 {
		return
	}
	last := &r.parts[len(r.parts)-1]
	joined := *last.Text + r.tail.String()
	last.Text = &joined
	r.tail.Reset()
}

// add takes in one GenerateContentResponse. A reply whose prompt was
// blocked is an invalid_request error (the same prompt would be blocked
// again).
func (r *reply) add(data []byte, onDelta func(llm.Delta)) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		// An error some servers send as a one-element list.
		var list []json.RawMessage
		if json.Unmarshal(data, &list) == nil && len(list) > 0 {
			data = list[0]
		}
	}
	var g generateResponse
	if err := json.Unmarshal(data, &g); err != nil {
		return wire.Malformed("reply", err)
	}
	if len(g.Error) > 0 && string(g.Error) != "null" {
		return replyError(g.Error)
	}
	if g.PromptFeedback != nil && g.PromptFeedback.BlockReason != "" {
		return &llm.Error{Category: llm.InvalidRequest, Message: "the prompt was blocked: " + g.PromptFeedback.BlockReason}
	}
	if g.ModelVersion != "" {
		r.model = g.ModelVersion
	}
	if g.UsageMetadata != nil {
		r.usage = g.UsageMetadata.llm()
	}
	var raws *rawParts
	for i := range g.Candidates {
		c := &g.Candidates[i]
		if c.Index != 0 {
			continue
		}
		for j := range c.Content.Parts {
			p := c.Content.Parts[j]
			if p.ThoughtSignature != "" || p.Text == nil {
				// Kept as it came (a plain text part is the same written
				// from its fields): the chunk is read again for its parts'
				// JSON, which only such chunks pay for.
				if raws == nil {
					raws = &rawParts{}
					if err := json.Unmarshal(data, raws); err != nil {
						return wire.Malformed("reply", err)
					}
				}
				raw := raws.Candidates[i].Content.Parts[j]
				var compact bytes.Buffer
				if err := json.Compact(&compact, raw); err != nil {
					return wire.Malformed("part", err)
				}
				p.raw = compact.Bytes()
			}
			r.addPart(p, onDelta)
		}
		if c.FinishReason != "" {
			r.finish = c.FinishReason
		}
	}
	return nil
}

// rawParts is the parts of a GenerateContentResponse as they came.
type rawParts struct {
	Candidates []struct {
		Content struct {
			Parts []json.RawMessage `json:"parts"`
		} `json:"content"`
	} `json:"candidates"`
}

// addPart appends a part. A streamed text arrives in many parts: a text
// part joins the text part before it when both are thoughts or both are
// not and the one before carries no signature (a signature closes its
// part); a part with nothing but a signature gives it to the part before
// when that has none. A joined part loses its raw form.
func (r *reply) addPart(p part, onDelta func(llm.Delta)) {
	if p.ThoughtSignature != "" {
		r.signed = true
	}
	if p.Text != nil && *p.Text != "" && onDelta != nil {
		if p.Thought {
			onDelta(llm.Delta{Thinking: *p.Text})
		} else {
			onDelta(llm.Delta{Text: *p.Text})
		}
	}
	if n := len(r.parts); n > 0 {
		last := &r.parts[n-1]
		onlySignature := p.ThoughtSignature != "" && (p.Text == nil || *p.Text == "") && p.FunctionCall == nil && p.InlineData == nil
		switch {
		case onlySignature && last.ThoughtSignature == "":
			last.ThoughtSignature, last.raw = p.ThoughtSignature, nil
			return
		case p.Text != nil && last.Text != nil && p.Thought == last.Thought && last.ThoughtSignature == "" &&
			p.FunctionCall == nil && last.FunctionCall == nil:
			r.tail.WriteString(*p.Text)
			last.ThoughtSignature, last.raw = p.ThoughtSignature, nil
			return
		}
	}
	r.flush()
	r.parts = append(r.parts, p)
}

func (r *reply) response() (*llm.Response, error) {
	r.flush()
	resp := &llm.Response{Model: r.model, Usage: r.usage}
	var text, thought strings.Builder
	for _, p := range r.parts {
		switch {
		case p.FunctionCall != nil:
			args := map[string]any{}
			if a := bytes.TrimSpace(p.FunctionCall.Args); len(a) > 0 && string(a) != "null" {
				args = wire.DecodeArguments(string(a))
			}
			id := p.FunctionCall.ID
			if id == "" {
				id = makeID(len(resp.ToolCalls) + 1)
			}
			resp.ToolCalls = append(resp.ToolCalls, message.ToolCall{ID: id, Name: p.FunctionCall.Name, Arguments: args})
		case p.Text != nil && p.Thought:
			thought.WriteString(*p.Text)
		case p.Text != nil:
			text.WriteString(*p.Text)
		}
	}
	resp.Text = text.String()
	if r.signed || thought.Len() > 0 {
		b := message.Block{Type: message.BlockThinking, Thinking: thought.String()}
		if r.signed {
			raws := make([][]byte, 0, len(r.parts))
			for _, p := range r.parts {
				raw, err := p.MarshalJSON()
				if err != nil {
					return nil, err
				}
				raws = append(raws, raw)
			}
			b.Origin, b.Data = Name, "["+string(bytes.Join(raws, []byte(",")))+"]"
		}
		resp.Thinking = []message.Block{b}
	}
	resp.StopReason = stopReason(r.finish, len(resp.ToolCalls) > 0)
	return resp, nil
}

// stopReason maps a finishReason: STOP → end_turn (tool_use when the reply
// calls tools), MAX_TOKENS → max_tokens; others (SAFETY, RECITATION,
// MALFORMED_FUNCTION_CALL, ...) are kept, lower-cased.
func stopReason(finish string, hasCalls bool) string {
	switch finish {
	case "STOP", "", "FINISH_REASON_UNSPECIFIED":
		if hasCalls {
			return llm.StopToolUse
		}
		return llm.StopEnd
	case "MAX_TOKENS":
		return llm.StopMaxTokens
	}
	return strings.ToLower(finish)
}

// makeID returns the id of the nth call of a reply (from 1) whose
// functionCall has no id, as models before Gemini 3 send them: call_n.
func makeID(n int) string { return "call_" + strconv.Itoa(n) }

// madeUpID reports whether id is one makeID returns.
func madeUpID(id string) bool {
	n, ok := strings.CutPrefix(id, "call_")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
