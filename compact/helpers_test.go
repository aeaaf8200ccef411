package compact

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

func user(text string) message.Message { return message.Message{Role: message.RoleUser, Text: text} }
func system(text string) message.Message {
	return message.Message{Role: message.RoleSystem, Text: text}
}
func asst(text string, calls ...message.ToolCall) message.Message {
	return message.Message{Role: message.RoleAssistant, Text: text, ToolCalls: calls}
}
func call(id, name string, args map[string]any) message.ToolCall {
	return message.ToolCall{ID: id, Name: name, Arguments: args}
}
func result(id, name, text string) message.Message {
	return message.Message{Role: message.RoleTool, ToolCallID: id, Name: name, Text: text}
}

// build makes a valid transcript from a pattern of tokens: U (user), S
// (system), A (assistant), A*N (assistant calling N tools; A* is A*1), T
// (the result of the next unanswered call), Σ (a summary message of 5
// messages). Texts name the message's index.
func build(pattern string) []message.Message {
	var out []message.Message
	var open []string
	calls := 0
	for _, tok := range strings.Fields(pattern) {
		i := len(out)
		switch {
		case tok == "U":
			out = append(out, user(fmt.Sprintf("u%d", i)))
		case tok == "S":
			out = append(out, system(fmt.Sprintf("s%d", i)))
		case tok == "A":
			out = append(out, asst(fmt.Sprintf("a%d", i)))
		case tok == "Σ":
			out = append(out, SummaryMessage(5, StrategyTruncate, fmt.Sprintf("sum%d", i)))
		case strings.HasPrefix(tok, "A*"):
			n := 1
			if tok != "A*" {
				fmt.Sscan(tok[2:], &n)
			}
			var cs []message.ToolCall
			for range n {
				calls++
				id := fmt.Sprintf("c%d", calls)
				cs = append(cs, call(id, "tool", map[string]any{"i": int64(calls)}))
				open = append(open, id)
			}
			out = append(out, asst(fmt.Sprintf("a%d", i), cs...))
		case tok == "T":
			out = append(out, result(open[0], "tool", fmt.Sprintf("t%d", i)))
			open = open[1:]
		default:
			panic("build: bad token " + tok)
		}
	}
	return out
}

// shape renders msgs as pattern tokens with the archived range in brackets.
func shape(msgs []message.Message, lo, cut int) string {
	var b strings.Builder
	for i := range msgs {
		if i == lo {
			b.WriteString("[")
		}
		m := &msgs[i]
		switch {
		case m.HasToolCalls():
			fmt.Fprintf(&b, "A*%d", len(m.ToolCalls))
		case m.Role == message.RoleTool:
			b.WriteString("T")
		default:
			b.WriteString(strings.ToUpper(m.Role[:1]))
		}
		if i == cut-1 {
			b.WriteString("]")
		}
		if i < len(msgs)-1 {
			b.WriteString(" ")
		}
	}
	return strings.ReplaceAll(b.String(), "A*1", "A*")
}

// fakeProvider answers every call with text (or err) and records requests.
type fakeProvider struct {
	text string
	err  error
	mu   sync.Mutex
	reqs []*llm.Request
}

func (p *fakeProvider) Name() string { return "fake" }

func (p *fakeProvider) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	if p.err != nil {
		return nil, p.err
	}
	return &llm.Response{Text: p.text, Model: req.Model}, nil
}

func ptr[T any](v T) *T { return &v }
