package acp

import (
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/skein-dev/skein/sessions/message"
)

// toolKind returns the ACP kind of the tool named name: skein's built-in
// tools (package builtins' tools.*) have theirs (an editor shows an icon
// per kind); every other tool is "other".
func toolKind(name string) sdk.ToolKind {
	switch name {
	case "read_file", "list_dir":
		return sdk.ToolKindRead
	case "write_file":
		return sdk.ToolKindEdit
	case "search":
		return sdk.ToolKindSearch
	case "run_command":
		return sdk.ToolKindExecute
	case "http_get":
		return sdk.ToolKindFetch
	}
	return sdk.ToolKindOther
}

// startCall is the tool_call update announcing call with status.
func startCall(call message.ToolCall, status sdk.ToolCallStatus) sdk.SessionUpdate {
	opts := []sdk.ToolCallStartOpt{sdk.WithStartKind(toolKind(call.Name)), sdk.WithStartStatus(status)}
	if call.Arguments != nil {
		opts = append(opts, sdk.WithStartRawInput(call.Arguments))
	}
	return sdk.StartToolCall(sdk.ToolCallId(call.ID), call.Name, opts...)
}

// resultStatus is the final status of a tool call whose result is m.
func resultStatus(m *message.Message) sdk.ToolCallStatus {
	if m.IsError {
		return sdk.ToolCallStatusFailed
	}
	return sdk.ToolCallStatusCompleted
}

// resultContent is a tool result as tool call content: its text.
func resultContent(m *message.Message) []sdk.ToolCallContent {
	text := m.TextContent()
	if text == "" {
		return nil
	}
	return []sdk.ToolCallContent{sdk.ToolContent(sdk.TextBlock(text))}
}

// finishCall is the tool_call_update that ends a call with its result m.
func finishCall(m *message.Message) sdk.SessionUpdate {
	return sdk.UpdateToolCall(sdk.ToolCallId(m.ToolCallID), sdk.WithUpdateStatus(resultStatus(m)), sdk.WithUpdateContent(resultContent(m)))
}

// thoughts are the updates of an assistant message's readable thinking.
func thoughts(m *message.Message) []sdk.SessionUpdate {
	var out []sdk.SessionUpdate
	for _, b := range m.Blocks {
		if b.Type == message.BlockThinking && b.Thinking != "" {
			out = append(out, sdk.UpdateAgentThoughtText(b.Thinking))
		}
	}
	return out
}

// replay returns the updates that show a stored transcript to a client
// (session/load): user text as user_message_chunk, assistant text and
// thinking as agent chunks, each tool call as one tool_call carrying its
// final status and result (a call without a result is pending). System
// messages are instructions, not conversation, and are not shown.
func replay(msgs []message.Message) []sdk.SessionUpdate {
	results := map[string]*message.Message{}
	for i := range msgs {
		if msgs[i].Role == message.RoleTool {
			results[msgs[i].ToolCallID] = &msgs[i]
		}
	}
	var out []sdk.SessionUpdate
	for i := range msgs {
		m := &msgs[i]
		switch m.Role {
		case message.RoleUser:
			if text := m.TextContent(); text != "" {
				out = append(out, sdk.UpdateUserMessageText(text))
			}
		case message.RoleAssistant:
			out = append(out, thoughts(m)...)
			if text := m.TextContent(); text != "" {
				out = append(out, sdk.UpdateAgentMessageText(text))
			}
			for _, call := range m.ToolCalls {
				res, ok := results[call.ID]
				if !ok {
					out = append(out, startCall(call, sdk.ToolCallStatusPending))
					continue
				}
				u := startCall(call, resultStatus(res))
				u.ToolCall.Content = resultContent(res)
				out = append(out, u)
			}
		}
	}
	return out
}

// promptText is the text of a prompt's content blocks, as the user
// message of the turn: text as is, a resource link as a Markdown link,
// an embedded text resource as its URI and a fenced copy of its text.
// Images, audio and binary resources are not taken (initialize does not
// offer them); they are named in a line of text instead of being
// dropped silently.
func promptText(blocks []sdk.ContentBlock) string {
	var parts []string
	for _, b := range blocks {
		switch {
		case b.Text != nil:
			parts = append(parts, b.Text.Text)
		case b.ResourceLink != nil:
			parts = append(parts, "["+b.ResourceLink.Name+"]("+b.ResourceLink.Uri+")")
		case b.Resource != nil && b.Resource.Resource.TextResourceContents != nil:
			r := b.Resource.Resource.TextResourceContents
			parts = append(parts, r.Uri+":\n```\n"+strings.TrimSuffix(r.Text, "\n")+"\n```")
		case b.Resource != nil && b.Resource.Resource.BlobResourceContents != nil:
			parts = append(parts, "[binary resource "+b.Resource.Resource.BlobResourceContents.Uri+" not included]")
		case b.Image != nil:
			parts = append(parts, "[image not included]")
		case b.Audio != nil:
			parts = append(parts, "[audio not included]")
		}
	}
	return strings.Join(parts, "\n\n")
}
