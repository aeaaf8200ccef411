package agent

import (
	"context"
	"math"
	"strings"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// EventToolProgress is logged for each progress report of a running
// ContentTool: data {name, progress, total (when known), message (when
// given)}, corr_id the call's id.
const EventToolProgress = "tool_progress"

// ContentTool is a Tool whose results may hold images and that reports
// progress while it runs, such as a tool of an MCP server. The loop calls
// RunContent instead of Run: the result's blocks become the tool message
// (its text when they are all text blocks), and each progress report is
// logged as a tool_progress event as it happens.
type ContentTool interface {
	Tool
	// RunContent executes a call whose arguments were validated against
	// the spec's schema. progress may be called from any goroutine until
	// RunContent returns; total 0 means unknown.
	RunContent(ctx context.Context, call message.ToolCall, progress func(done, total float64, message string)) ([]message.Block, error)
}

type progressReport struct {
	done, total float64
	message     string
}

// runContent runs a ContentTool, logging its progress reports while it
// runs: every report made before RunContent returns is logged before the
// result.
func (l *loop) runContent(ctx context.Context, tool ContentTool, call message.ToolCall) (string, []message.Block, error) {
	type result struct {
		blocks []message.Block
		err    error
	}
	reports := make(chan progressReport, 16)
	done := make(chan result, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		blocks, err := tool.RunContent(ctx, call, func(d, t float64, m string) {
			select {
			case reports <- progressReport{d, t, m}:
			case <-stop:
			}
		})
		done <- result{blocks, err}
	}()
	for {
		select {
		case p := <-reports:
			if err := l.logProgress(call, p); err != nil {
				return "", nil, err
			}
		case r := <-done:
			for len(reports) > 0 {
				if err := l.logProgress(call, <-reports); err != nil {
					return "", nil, err
				}
			}
			if r.err != nil {
				return "", nil, r.err
			}
			text, blocks := toolContent(r.blocks)
			return text, blocks, nil
		}
	}
}

// logProgress writes a tool_progress event at once.
func (l *loop) logProgress(call message.ToolCall, p progressReport) error {
	data := map[string]any{"name": call.Name, "progress": number(p.done)}
	if p.total > 0 {
		data["total"] = number(p.total)
	}
	if p.message != "" {
		data["message"] = p.message
	}
	ev := sessions.NewEvent(EventToolProgress, data)
	ev.CorrID = call.ID
	return l.write(&sessions.Change{Events: []sessions.Event{ev}})
}

// number is f as an int64 when it is a whole number, so 3 reads 3.
func number(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return f
}

// toolContent is what a tool message holds for a result's blocks: their
// text joined by newlines when they are all text, else the blocks.
func toolContent(blocks []message.Block) (string, []message.Block) {
	var parts []string
	for _, b := range blocks {
		if b.Type != message.BlockText {
			return "", blocks
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n"), nil
}

// shortenContent shortens the text of a tool result (see
// shortenToolOutput): the text, or each text block.
func (l *loop) shortenContent(name, text string, blocks []message.Block) (string, []message.Block, error) {
	if blocks == nil {
		text, err := l.shortenToolOutput(name, text)
		return text, nil, err
	}
	out := make([]message.Block, len(blocks))
	for i, b := range blocks {
		if b.Type == message.BlockText {
			var err error
			if b.Text, err = l.shortenToolOutput(name, b.Text); err != nil {
				return "", nil, err
			}
		}
		out[i] = b
	}
	return "", out, nil
}
