package compact

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/sessions/message"
)

// DefaultSummarizePrompt is the system prompt of the llm strategy's model
// call unless Options.SummarizePrompt replaces it.
const DefaultSummarizePrompt = `You compact the history of a conversation between a user and an AI assistant that uses tools. The archived messages you are given will be removed from the conversation and replaced by your summary, so the assistant must be able to continue the work from the summary alone.

Write a concise summary that keeps:
- the user's goals and the current task;
- constraints, requirements and preferences that were stated;
- decisions made, and why;
- concrete values: file paths, names, identifiers, commands, numbers, URLs, error messages;
- the work completed so far: which tools were called and what they found or changed;
- open problems and the next steps.

An entry labelled [summary] summarises even older messages: fold it into your summary. Reply with the summary only, as plain text, without a preamble.`

// llmSummary makes one model call through opts.Provider that summarises
// archived. The request has opts.Model, the system prompt (SummarizePrompt
// or DefaultSummarizePrompt), no tools, and one user message: see
// renderForLLM. The reply's text, trimmed, is the summary; an empty reply
// is an error, as is a failed call (wrap the provider for retries: this
// makes exactly one call).
func llmSummary(ctx context.Context, archived []message.Message, opts *Options) (string, error) {
	system := opts.SummarizePrompt
	if system == "" {
		system = DefaultSummarizePrompt
	}
	req := &llm.Request{
		Model:    opts.Model,
		System:   system,
		Messages: []message.Message{{Role: message.RoleUser, Text: renderForLLM(archived)}},
	}
	resp, err := opts.Provider.Complete(ctx, req)
	if err != nil {
		return "", fmt.Errorf("llm summary: %w", err)
	}
	text := strings.TrimSpace(resp.Text)
	if text == "" {
		return "", errors.New("llm summary: the model returned no text")
	}
	return text, nil
}

// renderForLLM renders archived messages for the summarising model:
// "Summarize these N archived messages." and then, after a blank line, one
// entry per message separated by blank lines: "LABEL BODY" with the body in
// full (see appendBody); an earlier summary message is "[summary] BODY".
func renderForLLM(archived []message.Message) string {
	buf := []byte("Summarize these ")
	buf = strconv.AppendInt(buf, int64(len(archived)), 10)
	buf = append(buf, " archived messages."...)
	for i := range archived {
		m := &archived[i]
		buf = append(buf, "\n\n"...)
		info, isSummary := ParseSummary(m)
		buf = appendLabel(buf, m, isSummary)
		mark := len(buf)
		buf = append(buf, ' ')
		if isSummary {
			buf = append(buf, info.Body...)
		} else {
			buf = appendBody(buf, m)
		}
		if len(buf) == mark+1 {
			buf = buf[:mark]
		}
	}
	return string(buf)
}
