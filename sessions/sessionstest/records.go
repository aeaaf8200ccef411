package sessionstest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// t0 is the suite's clock origin: nanoseconds and a zone other than UTC,
// so a backend that loses either fails.
var t0 = time.Date(2025, time.March, 14, 9, 26, 53, 589793238, time.FixedZone("UTC+1", 3600))

// at returns t0 plus n minutes.
func at(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }

// newRecord returns a new active session created at created.
func newRecord(id string, created time.Time) *sessions.Record {
	return &sessions.Record{ID: id, Status: sessions.StatusActive, CreatedAt: created, UpdatedAt: created,
		Metadata: map[string]any{"owner": "sessionstest"}}
}

// user returns a user message with text s.
func user(s string) message.Message {
	return message.Message{Role: message.RoleUser, Text: s}
}

// users returns user messages prefix0 .. prefix(n-1).
func users(prefix string, n int) []message.Message {
	out := make([]message.Message, n)
	for i := range out {
		out[i] = user(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// richMessages is a valid transcript that uses every message feature:
// block content of each kind, tool calls with nested arguments, tool
// results, metadata and usage holding int64 and float64 values (whole
// floats included), and text that needs escaping.
func richMessages() []message.Message {
	return []message.Message{
		{ID: "0195925c-2f1d-7000-8000-000000000001", CreatedAt: at(0).UTC(), Role: message.RoleSystem, Text: "You are terse.\nQuotes \" and \\ backslashes, <tags> & unicode: héllo 世界 🎉\t"},
		{Role: message.RoleUser,
			Blocks: []message.Block{
				{Type: message.BlockText, Text: "look at this"},
				{Type: message.BlockImage, MediaType: "image/png", Data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"},
			},
			Metadata: map[string]any{
				"source": "cli", "attempt": int64(2), "score": 0.75, "weight": 2.0, "zero": 0.0,
				"big": int64(1) << 62, "min": int64(math.MinInt64), "huge": 1e300, "tiny": 1e-9,
				"tags":   []any{"a", int64(1), 1.5, 3.0, true, nil},
				"nested": map[string]any{"k": map[string]any{"deep": []any{map[string]any{"x": int64(-3), "y": -3.0}}}},
			}},
		{Role: message.RoleAssistant,
			Blocks: []message.Block{
				{Type: message.BlockThinking, Thinking: "which tools?", Signature: "c2lnbmF0dXJl"},
				{Type: message.BlockRedactedThinking, Data: "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
				{Type: message.BlockThinking, Thinking: "summary <b>", Origin: "openai_responses", Data: `{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"summary <b>"}],"encrypted_content":"gAAAA=="}`},
				{Type: message.BlockText, Text: "calling two tools"},
			},
			ToolCalls: []message.ToolCall{
				{ID: "call_1", Name: "search", Arguments: map[string]any{
					"query": "go sqlite", "limit": int64(10), "threshold": 0.5, "exact": 1.0,
					"filters": map[string]any{"langs": []any{"go", "c"}, "since": nil, "on": true},
				}},
				{ID: "call_2", Name: "noop", Arguments: map[string]any{}},
			},
			Model: "mock-large",
			Usage: map[string]any{"input_tokens": int64(1234), "output_tokens": int64(56), "cost_usd": 0.0125,
				"cache": map[string]any{"hits": int64(0), "ratio": 1.0}}},
		{Role: message.RoleTool, ToolCallID: "call_1", Name: "search", Text: "3 results\nfirst line"},
		{Role: message.RoleTool, ToolCallID: "call_2", Name: "noop", IsError: true, Text: "boom"},
		{Role: message.RoleAssistant, Text: "", Model: "mock-large"},
		{Role: message.RoleUser, Blocks: []message.Block{}},
		{Role: message.RoleUser, Text: strings.Repeat("long ", 2000)},
	}
}

// stamp sequences events for want's session as the store does: seq after
// the last logged one, SessionID, and the time when.
func stamp(want *sessions.Record, when time.Time, events ...sessions.Event) []sessions.Event {
	seq := int64(0)
	if n := len(want.Events); n > 0 {
		seq = want.Events[n-1].Seq
	}
	out := make([]sessions.Event, len(events))
	for i, e := range events {
		seq++
		e.Seq, e.SessionID, e.Time = seq, want.ID, when
		out[i] = e
	}
	return out
}

// richEvents returns unsequenced events that use every event field.
func richEvents() []sessions.Event {
	return []sessions.Event{
		{Type: sessions.EventMessage, Data: map[string]any{"index": int64(0), "role": "user"}},
		{Type: "tool_call", CorrID: "call_1", Data: map[string]any{"name": "search",
			"arguments": map[string]any{"q": "x", "n": int64(3), "f": 3.0}}},
		{Type: "tool_result", CorrID: "call_1", Data: map[string]any{"status": "ok", "duration_ms": int64(12),
			"score": 0.5, "ok": true, "none": nil}},
		{Type: "turn_end"},
		{Type: "custom", Data: map[string]any{}},
	}
}

// cloneRecord deep-copies a record (messages are shared: they are
// immutable).
func cloneRecord(r *sessions.Record) *sessions.Record {
	out := *r
	out.Messages = slices.Clone(r.Messages)
	out.Events = slices.Clone(r.Events)
	out.ChildIDs = slices.Clone(r.ChildIDs)
	out.Metadata = jsonvalue.CloneObject(r.Metadata)
	if r.Summary != nil {
		s := *r.Summary
		out.Summary = &s
	}
	if r.BranchedAt != nil {
		n := *r.BranchedAt
		out.BranchedAt = &n
	}
	return &out
}

// apply is the reference semantics of Backend.Write: ch applied to want
// as the memory backend applies it.
func apply(want *sessions.Record, ch *sessions.Change) {
	tr := sessions.ApplyToTranscript(message.NewTranscript(slices.Clone(want.Messages)), ch)
	want.Messages = tr.Slice()
	sessions.ApplyToRecord(want, ch)
}

// diffRecord lists the differences between got and want, one line each.
func diffRecord(got, want *sessions.Record) []string {
	var d []string
	add := func(field string, g, w any) {
		d = append(d, fmt.Sprintf("%s: got %#v, want %#v", field, g, w))
	}
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Status != want.Status {
		add("Status", got.Status, want.Status)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("CreatedAt", got.CreatedAt.String(), want.CreatedAt.String())
	}
	if !got.UpdatedAt.Equal(want.UpdatedAt) {
		add("UpdatedAt", got.UpdatedAt.String(), want.UpdatedAt.String())
	}
	if (got.Summary == nil) != (want.Summary == nil) || (got.Summary != nil && *got.Summary != *want.Summary) {
		add("Summary", derefString(got.Summary), derefString(want.Summary))
	}
	if !reflect.DeepEqual(got.Metadata, want.Metadata) {
		add("Metadata", got.Metadata, want.Metadata)
	}
	if got.Title != want.Title {
		add("Title", got.Title, want.Title)
	}
	if got.FirstPrompt != want.FirstPrompt {
		add("FirstPrompt", got.FirstPrompt, want.FirstPrompt)
	}
	if got.ParentID != want.ParentID {
		add("ParentID", got.ParentID, want.ParentID)
	}
	if !slices.Equal(got.ChildIDs, want.ChildIDs) {
		add("ChildIDs", got.ChildIDs, want.ChildIDs)
	}
	if (got.BranchedAt == nil) != (want.BranchedAt == nil) || (got.BranchedAt != nil && *got.BranchedAt != *want.BranchedAt) {
		add("BranchedAt", derefInt(got.BranchedAt), derefInt(want.BranchedAt))
	}
	if got.Turns != want.Turns {
		add("Turns", got.Turns, want.Turns)
	}
	if got.MaxTurns != want.MaxTurns {
		add("MaxTurns", got.MaxTurns, want.MaxTurns)
	}
	if got.Version != want.Version {
		add("Version", got.Version, want.Version)
	}
	d = append(d, diffMessages(got.Messages, want.Messages)...)
	return append(d, diffEvents(got.Events, want.Events)...)
}

func derefString(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func derefInt(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}

// diffMessages compares message lists exactly (reflect.DeepEqual per
// message, CreatedAt with Equal).
func diffMessages(got, want []message.Message) []string {
	if len(got) != len(want) {
		return []string{fmt.Sprintf("Messages: got %d %s, want %d %s", len(got), texts(got), len(want), texts(want))}
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.CreatedAt.Equal(w.CreatedAt) {
			g.CreatedAt = w.CreatedAt
		}
		if !reflect.DeepEqual(g, w) {
			return []string{fmt.Sprintf("Messages[%d]:\n\tgot  %#v\n\twant %#v", i, got[i], want[i])}
		}
	}
	return nil
}

// texts abbreviates a message list for failure messages.
func texts(msgs []message.Message) string {
	var parts []string
	for i := range msgs {
		if len(parts) == 12 {
			parts = append(parts, "...")
			break
		}
		s := msgs[i].TextContent()
		if len(s) > 12 {
			s = s[:12] + "…"
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// diffEvents compares event lists field by field (times with Equal).
func diffEvents(got, want []sessions.Event) []string {
	if len(got) != len(want) {
		return []string{fmt.Sprintf("Events: got %d, want %d", len(got), len(want))}
	}
	var d []string
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.SessionID != w.SessionID || !g.Time.Equal(w.Time) ||
			g.CorrID != w.CorrID || !reflect.DeepEqual(g.Data, w.Data) {
			d = append(d, fmt.Sprintf("Events[%d]:\n\tgot  %#v\n\twant %#v", i, g, w))
		}
	}
	return d
}

func (h *harness) ctx() context.Context { return h.t.Context() }

// check fails the test unless the backend holds want: Load returns it,
// LoadMeta returns it without messages and events, and so do the methods
// of the optional interfaces (checkPartial).
func (h *harness) check(want *sessions.Record) {
	h.t.Helper()
	got, err := h.b.Load(h.ctx(), want.ID)
	if err != nil {
		h.t.Fatalf("Load(%q): %v", want.ID, err)
	}
	if d := diffRecord(got, want); len(d) > 0 {
		h.t.Fatalf("Load(%q) differs:\n%s", want.ID, strings.Join(d, "\n"))
	}
	meta, err := h.b.LoadMeta(h.ctx(), want.ID)
	if err != nil {
		h.t.Fatalf("LoadMeta(%q): %v", want.ID, err)
	}
	if len(meta.Messages) != 0 || len(meta.Events) != 0 {
		h.t.Fatalf("LoadMeta(%q) returned %d messages and %d events, want none", want.ID, len(meta.Messages), len(meta.Events))
	}
	w := cloneRecord(want)
	w.Messages, w.Events = nil, nil
	if d := diffRecord(meta, w); len(d) > 0 {
		h.t.Fatalf("LoadMeta(%q) differs:\n%s", want.ID, strings.Join(d, "\n"))
	}
	h.checkPartial(want)
}

// create stores rec and returns the record the backend should now hold.
func (h *harness) create(rec *sessions.Record) *sessions.Record {
	h.t.Helper()
	if err := h.b.Create(h.ctx(), cloneRecord(rec)); err != nil {
		h.t.Fatalf("Create(%q): %v", rec.ID, err)
	}
	return cloneRecord(rec)
}

// write applies ch to want's session at want's version, applies it to want
// too and checks that the backend holds want.
func (h *harness) write(want *sessions.Record, ch *sessions.Change) {
	h.t.Helper()
	if err := h.b.Write(h.ctx(), want.ID, want.Version, ch); err != nil {
		h.t.Fatalf("Write(%q, %d): %v", want.ID, want.Version, err)
	}
	apply(want, ch)
	h.check(want)
}

// fork forks src into a new session dst keeping the first keep messages,
// as the store's Fork does, updates src, checks both and returns dst's
// expected record.
func (h *harness) fork(src *sessions.Record, dst string, keep int, when time.Time) *sessions.Record {
	h.t.Helper()
	spec, child := forkSpec(src, dst, keep, when)
	h.doFork(src, spec)
	h.check(child)
	return child
}

// doFork runs spec, applies it to src and checks both sessions.
func (h *harness) doFork(src *sessions.Record, spec *sessions.ForkSpec) {
	h.t.Helper()
	if err := h.b.Fork(h.ctx(), spec); err != nil {
		h.t.Fatalf("Fork(%q -> %q, %d): %v", spec.Src, spec.Dst.ID, spec.KeepFirst, err)
	}
	applyFork(src, spec)
	h.check(src)
}

// forkSpec builds the ForkSpec the store would and the child's expected
// record.
func forkSpec(src *sessions.Record, dst string, keep int, when time.Time) (*sessions.ForkSpec, *sessions.Record) {
	k := keep
	child := &sessions.Record{ID: dst, Status: sessions.StatusActive, CreatedAt: when, UpdatedAt: when,
		Metadata: map[string]any{"parent_session_id": src.ID}, ParentID: src.ID, BranchedAt: &k, MaxTurns: src.MaxTurns}
	child.Events = stamp(child, when, sessions.Event{Type: sessions.EventFork,
		Data: map[string]any{"parent_id": src.ID, "kept": int64(keep)}})
	srcEvent := stamp(src, when, sessions.Event{Type: sessions.EventFork,
		Data: map[string]any{"child_id": dst, "kept": int64(keep)}})[0]
	spec := &sessions.ForkSpec{Src: src.ID, SrcVersion: src.Version, SrcEvent: srcEvent, SrcTime: when,
		KeepFirst: keep, Dst: *cloneRecord(child)}
	if keep >= 0 && keep <= len(src.Messages) {
		child.Messages = slices.Clone(src.Messages[:keep])
	}
	return spec, child
}

// applyFork is the reference semantics of Backend.Fork on the source.
func applyFork(src *sessions.Record, spec *sessions.ForkSpec) {
	src.ChildIDs = append(src.ChildIDs, spec.Dst.ID)
	sessions.ApplyToRecord(src, &sessions.Change{Events: []sessions.Event{spec.SrcEvent}, UpdatedAt: spec.SrcTime})
}

// wantErr fails the test unless err wraps target and names id.
func (h *harness) wantErr(op string, err, target error, id string) {
	h.t.Helper()
	switch {
	case err == nil:
		h.t.Fatalf("%s: no error, want %v", op, target)
	case !errors.Is(err, target):
		h.t.Fatalf("%s: got error %q, want one wrapping %q", op, err, target)
	case !strings.Contains(err.Error(), id):
		h.t.Fatalf("%s: error %q does not name the session %q", op, err, id)
	}
}
