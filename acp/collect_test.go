package acp

import (
	"context"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// shapeOf is a message as role (! for an error result), tool call ids
// and text, for comparisons.
func shapeOf(m message.Message) string {
	s := m.Role
	if m.IsError {
		s += "!"
	}
	if m.ToolCallID != "" {
		s += "(" + m.ToolCallID + ")"
	}
	if len(m.ToolCalls) > 0 {
		var ids []string
		for _, c := range m.ToolCalls {
			ids = append(ids, c.ID+":"+c.Name)
		}
		s += "[" + strings.Join(ids, ",") + "]"
	}
	for _, b := range m.Blocks {
		if b.Type == message.BlockThinking {
			s += " {" + b.Thinking + "}"
		}
	}
	return s + " " + m.TextContent()
}

func done(id string, failed bool, text string) sdk.SessionUpdate {
	st := sdk.ToolCallStatusCompleted
	if failed {
		st = sdk.ToolCallStatusFailed
	}
	return sdk.UpdateToolCall(sdk.ToolCallId(id), sdk.WithUpdateStatus(st), sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(text))}))
}

// TestCollector stores an agent's updates as a valid transcript: chunks
// joined, a call stored when it starts, calls started while others run
// stored once those have results, results after their calls, open calls
// healed at the end.
func TestCollector(t *testing.T) {
	cases := []struct {
		name    string
		updates []sdk.SessionUpdate
		end     string
		want    []string
	}{
		{"text only", []sdk.SessionUpdate{sdk.UpdateAgentThoughtText("hmm"), sdk.UpdateAgentMessageText("Hel"), sdk.UpdateAgentMessageText("lo.")}, "interrupted",
			[]string{"assistant {hmm} Hello."}},
		{"parallel calls, results out of order", []sdk.SessionUpdate{
			sdk.UpdateAgentMessageText("Looking."),
			sdk.StartToolCall("a", "Read a", sdk.WithStartRawInput(map[string]any{"path": "a"})),
			sdk.StartToolCall("b", "Read b"),
			sdk.StartToolCall("c", "Read c"),
			done("c", false, "C"),
			sdk.UpdateAgentMessageText("Still looking."),
			done("b", true, "no b"),
			done("a", false, "A"),
			sdk.UpdateAgentMessageText("Done."),
		}, "interrupted", []string{
			"assistant[a:Read a] Looking.",
			"tool(a) A",
			"assistant[b:Read b,c:Read c] Still looking.",
			"tool(c) C",
			"tool!(b) no b",
			"assistant Done.",
		}},
		{"a call never finished is healed", []sdk.SessionUpdate{
			sdk.StartToolCall("x", "Wait"),
			sdk.UpdateAgentMessageText("meanwhile"),
			sdk.StartToolCall("y", "Also"),
		}, "cancelled", []string{
			"assistant[x:Wait] ",
			"tool!(x) cancelled",
			"assistant[y:Also] meanwhile",
			"tool!(y) cancelled",
		}},
		{"updates of unknown calls and repeated results change nothing", []sdk.SessionUpdate{
			done("ghost", false, "boo"),
			sdk.StartToolCall("k", "Known"),
			done("k", false, "first"),
			done("k", false, "second"),
			sdk.UpdateToolCall("k", sdk.WithUpdateStatus(sdk.ToolCallStatusInProgress)),
		}, "interrupted", []string{"assistant[k:Known] ", "tool(k) first"}},
		{"a call announced by its update", []sdk.SessionUpdate{
			sdk.UpdateToolCall("u", sdk.WithUpdateTitle("Late"), sdk.WithUpdateRawInput([]any{"x"}), sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted)),
		}, "interrupted", []string{"assistant[u:Late] ", "tool(u) "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			store, err := sessions.NewStore(sessions.NewMemoryBackend())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Open(ctx, "s", 0); err != nil {
				t.Fatal(err)
			}
			var deltas strings.Builder
			stop := store.Observe(func(e sessions.Event) {
				if e.Type == "text_delta" {
					deltas.WriteString(e.Data["text"].(string))
				}
			})
			defer stop()
			col := newCollector(ctx, store, "s", 0)
			for _, u := range c.updates {
				col.update(u)
			}
			if err := col.finish(c.end); err != nil {
				t.Fatal(err)
			}
			msgs, err := store.ReadMessages(ctx, "s")
			if err != nil {
				t.Fatal(err)
			}
			if err := message.Validate(msgs); err != nil {
				t.Fatalf("invalid transcript: %v", err)
			}
			var got []string
			var text strings.Builder
			for _, m := range msgs {
				got = append(got, shapeOf(m))
				if m.Role == message.RoleAssistant {
					text.WriteString(m.TextContent())
				}
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("stored\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if deltas.String() != text.String() {
				t.Errorf("text deltas %q, stored text %q", deltas.String(), text.String())
			}
		})
	}
	if args := toolArguments([]any{"x"}); len(args) != 1 || args["input"] == nil {
		t.Errorf("toolArguments of a list = %v", args)
	}
}
