package llm

import (
	"context"

	"github.com/skein-dev/skein/sessions/message"
)

// redacting is a provider whose replies have the known secrets (its API
// key first of all) replaced by "<secret NAME>" before anything else sees
// them: the transcript, events, a --llm-record fixture. A server that
// echoes the key back in a reply does not get it stored.
type redacting struct {
	Provider
	r *message.Redactor
}

// Redacting wraps p so that the text, tool calls (names, ids and
// arguments) and model of its replies are redacted by r. Thinking blocks are left as they are:
// providers sign them and refuse a changed one sent back.
func Redacting(p Provider, r *message.Redactor) Provider {
	if r == nil {
		return p
	}
	return &redacting{Provider: p, r: r}
}

// Complete calls the provider and redacts its reply.
func (p *redacting) Complete(ctx context.Context, req *Request) (*Response, error) {
	resp, err := p.Provider.Complete(ctx, req)
	if resp == nil {
		return resp, err
	}
	m := p.r.RedactMessage(message.Message{Role: message.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls, Model: resp.Model})
	out := *resp
	out.Text, out.ToolCalls, out.Model = m.Text, m.ToolCalls, m.Model
	return &out, err
}
