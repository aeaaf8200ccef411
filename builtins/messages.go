package builtins

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
)

// blockKeys lists the keys allowed in a content block dict of a type;
// known is false for a type that has no such list. (A switch, not a map:
// a map literal would be built at every start.)
func blockKeys(typ string) (allowed []string, known bool) {
	switch typ {
	case message.BlockText:
		return []string{"text", "type"}, true
	case message.BlockThinking:
		return []string{"data", "origin", "signature", "thinking", "type"}, true
	case message.BlockRedactedThinking:
		return []string{"data", "type"}, true
	case message.BlockImage:
		return []string{"data", "media_type", "type"}, true
	}
	return nil, false
}

// messageFromStarlark converts a message dict to a Message,
// checking every key. Errors are prefixed with fn. It does not check the
// message against a transcript; the store does that.
func messageFromStarlark(fn string, v starlark.Value) (message.Message, error) {
	var m message.Message
	d, ok := v.(*starlark.Dict)
	if !ok {
		return m, fmt.Errorf("%s: message must be a dict", fn)
	}
	bad := func(format string, args ...any) (message.Message, error) {
		return message.Message{}, fmt.Errorf("%s: "+format, append([]any{fn}, args...)...)
	}
	fields := map[string]starlark.Value{}
	for _, item := range d.Items() {
		k, ok := item[0].(starlark.String)
		if !ok || !slices.Contains(message.Keys, string(k)) {
			return bad("unknown message key %s (expected one of: %s)", keyText(item[0]), strings.Join(message.Keys, ", "))
		}
		fields[string(k)] = item[1]
	}
	role, ok := fields["role"].(starlark.String)
	if !ok || !slices.Contains(message.Roles, string(role)) {
		return bad("message must have a string 'role' (one of: %s)", strings.Join(message.Roles, ", "))
	}
	m.Role = string(role)
	for _, key := range message.Keys {
		val, ok := fields[key]
		if !ok || key == "role" {
			continue
		}
		if sv, isSecret := val.(vm.Secret); isSecret {
			return bad("message key '%s': %s is a secret, which never enters a message", key, sv)
		}
		var err error
		switch key {
		case "content":
			m.Text, m.Blocks, err = contentFromStarlark(val)
		case "tool_calls":
			m.ToolCalls, err = toolCallsFromStarlark(val)
		case "id":
			m.ID, err = stringField(val)
		case "created_at":
			var s string
			if s, err = stringField(val); err == nil {
				if m.CreatedAt, err = time.Parse(sessions.TimeFormat, s); err != nil {
					err = fmt.Errorf("%q is not an RFC 3339 time", s)
				}
			}
		case "tool_call_id":
			m.ToolCallID, err = stringField(val)
		case "name":
			m.Name, err = stringField(val)
		case "model":
			m.Model, err = stringField(val)
		case "is_error":
			b, isBool := val.(starlark.Bool)
			if !isBool {
				err = fmt.Errorf("got %s, want bool", val.Type())
			}
			m.IsError = bool(b)
		case "metadata":
			m.Metadata, err = objectField(val, "metadata")
		case "usage":
			m.Usage, err = objectField(val, "usage")
		}
		if err != nil {
			return bad("message key '%s': %w", key, err)
		}
	}
	if err := message.CheckShape(&m); err != nil {
		return bad("%w", err)
	}
	return m, nil
}

func keyText(k starlark.Value) string {
	if s, ok := k.(starlark.String); ok {
		return "'" + string(s) + "'"
	}
	return k.String()
}

func stringField(v starlark.Value) (string, error) {
	s, ok := v.(starlark.String)
	if !ok {
		return "", fmt.Errorf("got %s, want string", v.Type())
	}
	return string(s), nil
}

func objectField(v starlark.Value, name string) (map[string]any, error) {
	if _, ok := v.(*starlark.Dict); !ok {
		return nil, fmt.Errorf("got %s, want dict", v.Type())
	}
	x, err := vm.FromStarlark(v, name)
	if err != nil {
		return nil, err
	}
	return x.(map[string]any), nil
}

func contentFromStarlark(v starlark.Value) (string, []message.Block, error) {
	switch v := v.(type) {
	case starlark.String:
		return string(v), nil, nil
	case *starlark.List, starlark.Tuple:
		seq := v.(starlark.Indexable)
		blocks := make([]message.Block, 0, seq.Len())
		for i := 0; i < seq.Len(); i++ {
			b, err := blockFromStarlark(seq.Index(i))
			if err != nil {
				return "", nil, fmt.Errorf("block %d: %w", i, err)
			}
			blocks = append(blocks, b)
		}
		return "", blocks, nil
	}
	return "", nil, fmt.Errorf("got %s, want string or list of blocks", v.Type())
}

func blockFromStarlark(v starlark.Value) (message.Block, error) {
	var b message.Block
	d, ok := v.(*starlark.Dict)
	if !ok {
		return b, fmt.Errorf("got %s, want dict", v.Type())
	}
	t, _, _ := d.Get(starlark.String("type"))
	typ, ok := t.(starlark.String)
	allowed, known := blockKeys(string(typ))
	if !ok || !known {
		return b, fmt.Errorf("block must have a string 'type' (one of: %s)", strings.Join(message.BlockTypes, ", "))
	}
	b.Type = string(typ)
	for _, item := range d.Items() {
		k, _ := item[0].(starlark.String)
		if !slices.Contains(allowed, string(k)) {
			return b, fmt.Errorf("unknown key %s in a %s block (expected one of: %s)", keyText(item[0]), b.Type, strings.Join(allowed, ", "))
		}
		if k == "type" {
			continue
		}
		s, err := stringField(item[1])
		if err != nil {
			return b, fmt.Errorf("key '%s': %w", string(k), err)
		}
		switch k {
		case "text":
			b.Text = s
		case "thinking":
			b.Thinking = s
		case "signature":
			b.Signature = s
		case "origin":
			b.Origin = s
		case "media_type":
			b.MediaType = s
		case "data":
			b.Data = s
		}
	}
	return b, nil
}

func toolCallsFromStarlark(v starlark.Value) ([]message.ToolCall, error) {
	seq, ok := v.(starlark.Indexable)
	if _, isStr := v.(starlark.String); isStr || !ok {
		return nil, fmt.Errorf("got %s, want list of {id, name, arguments} dicts", v.Type())
	}
	calls := make([]message.ToolCall, 0, seq.Len())
	for i := 0; i < seq.Len(); i++ {
		d, ok := seq.Index(i).(*starlark.Dict)
		if !ok {
			return nil, fmt.Errorf("[%d]: got %s, want dict", i, seq.Index(i).Type())
		}
		call := message.ToolCall{Arguments: map[string]any{}}
		for _, item := range d.Items() {
			k, _ := item[0].(starlark.String)
			var err error
			switch k {
			case "id":
				call.ID, err = stringField(item[1])
			case "name":
				call.Name, err = stringField(item[1])
			case "arguments":
				call.Arguments, err = objectField(item[1], "arguments")
			default:
				return nil, fmt.Errorf("[%d]: unknown key %s (expected one of: arguments, id, name)", i, keyText(item[0]))
			}
			if err != nil {
				return nil, fmt.Errorf("[%d] key '%s': %w", i, string(k), err)
			}
		}
		calls = append(calls, call)
	}
	return calls, nil
}

// messageToStarlark converts m to a fresh message dict. Optional keys
// appear only when set; a stored message ends with its id and created_at.
func messageToStarlark(m *message.Message) *starlark.Dict {
	d := starlark.NewDict(4)
	set := func(k string, v starlark.Value) { _ = d.SetKey(starlark.String(k), v) }
	set("role", starlark.String(m.Role))
	if m.Blocks != nil {
		blocks := make([]starlark.Value, len(m.Blocks))
		for i, b := range m.Blocks {
			blocks[i] = blockToStarlark(b)
		}
		set("content", starlark.NewList(blocks))
	} else {
		set("content", starlark.String(m.Text))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]starlark.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			cd := starlark.NewDict(3)
			_ = cd.SetKey(starlark.String("id"), starlark.String(c.ID))
			_ = cd.SetKey(starlark.String("name"), starlark.String(c.Name))
			_ = cd.SetKey(starlark.String("arguments"), vm.ToStarlark(map[string]any(c.Arguments)))
			calls[i] = cd
		}
		set("tool_calls", starlark.NewList(calls))
	}
	if m.Role == message.RoleTool {
		set("tool_call_id", starlark.String(m.ToolCallID))
		if m.Name != "" {
			set("name", starlark.String(m.Name))
		}
		set("is_error", starlark.Bool(m.IsError))
	}
	if m.Metadata != nil {
		set("metadata", vm.ToStarlark(m.Metadata))
	}
	if m.Model != "" {
		set("model", starlark.String(m.Model))
	}
	if m.Usage != nil {
		set("usage", vm.ToStarlark(m.Usage))
	}
	if m.ID != "" {
		set("id", starlark.String(m.ID))
	}
	if !m.CreatedAt.IsZero() {
		set("created_at", starlark.String(m.CreatedAt.UTC().Format(sessions.TimeFormat)))
	}
	return d
}

func blockToStarlark(b message.Block) *starlark.Dict {
	d := starlark.NewDict(3)
	set := func(k, v string) { _ = d.SetKey(starlark.String(k), starlark.String(v)) }
	set("type", b.Type)
	switch b.Type {
	case message.BlockText:
		set("text", b.Text)
	case message.BlockThinking:
		set("thinking", b.Thinking)
		if b.Signature != "" {
			set("signature", b.Signature)
		}
		if b.Origin != "" {
			set("origin", b.Origin)
			set("data", b.Data)
		}
	case message.BlockRedactedThinking:
		set("data", b.Data)
	case message.BlockImage:
		set("media_type", b.MediaType)
		set("data", b.Data)
	}
	return d
}

// messagesToStarlark converts a message list to a fresh Starlark list.
func messagesToStarlark(msgs []message.Message) *starlark.List {
	out := make([]starlark.Value, len(msgs))
	for i := range msgs {
		out[i] = messageToStarlark(&msgs[i])
	}
	return starlark.NewList(out)
}

// eventToStarlark converts an event to a fresh dict with the envelope keys
// first, then the event's fields in sorted order.
func eventToStarlark(e *sessions.Event) *starlark.Dict {
	// The exact size: a hint of 8 or more makes Starlark allocate a
	// second bucket table beside the dict's own (about 1 KB per event).
	n := 4 + len(e.Data)
	if e.CorrID != "" {
		n++
	}
	d := starlark.NewDict(n)
	set := func(k string, v starlark.Value) { _ = d.SetKey(starlark.String(k), v) }
	set("type", starlark.String(e.Type))
	set("session_id", starlark.String(e.SessionID))
	set("seq", starlark.MakeInt64(e.Seq))
	set("timestamp", starlark.String(e.Time.UTC().Format(sessions.TimeFormat)))
	if e.CorrID != "" {
		set("corr_id", starlark.String(e.CorrID))
	}
	for _, k := range slices.Sorted(maps.Keys(e.Data)) {
		set(k, vm.ToStarlark(e.Data[k]))
	}
	return d
}

// recordToStarlark converts a session record to the snapshot dict of
// the snapshot shape.
func recordToStarlark(rec *sessions.Record) *starlark.Dict {
	d := starlark.NewDict(16)
	set := func(k string, v starlark.Value) { _ = d.SetKey(starlark.String(k), v) }
	set("_type", starlark.String("transcript"))
	set("version", starlark.MakeInt(1))
	set("id", starlark.String(rec.ID))
	set("status", starlark.String(string(rec.Status)))
	set("created_at", starlark.String(rec.CreatedAt.UTC().Format(sessions.TimeFormat)))
	set("updated_at", starlark.String(rec.UpdatedAt.UTC().Format(sessions.TimeFormat)))
	set("title", optionalString(rec.Title))
	set("messages", messagesToStarlark(rec.Messages))
	events := make([]starlark.Value, len(rec.Events))
	for i := range rec.Events {
		events[i] = eventToStarlark(&rec.Events[i])
	}
	set("events", starlark.NewList(events))
	if rec.Summary != nil {
		set("summary", starlark.String(*rec.Summary))
	} else {
		set("summary", starlark.None)
	}
	meta := rec.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	set("metadata", vm.ToStarlark(meta))
	set("parent_id", optionalString(rec.ParentID))
	set("child_ids", vm.ToStarlark(append([]string{}, rec.ChildIDs...)))
	if rec.BranchedAt != nil {
		set("branched_at", starlark.MakeInt(*rec.BranchedAt))
	} else {
		set("branched_at", starlark.None)
	}
	set("turns", starlark.MakeInt(rec.Turns))
	set("max_turns", starlark.MakeInt(rec.MaxTurns))
	return d
}

func optionalString(s string) starlark.Value {
	if s == "" {
		return starlark.None
	}
	return starlark.String(s)
}
