package serve

import (
	"time"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// Metadata keys the server sets on the sessions it creates.
const (
	metaAgent  = "agent"  // the agent that serves the session
	metaRepoID = "repoId" // the repository the session works on
	metaReason = "reason" // why the session left active (idle_timeout, cancelled, error)
)

// sessionJSON is the JSON form of a session.
type sessionJSON struct {
	ID           string         `json:"id"`
	Agent        *string        `json:"agent"`
	RepoID       *string        `json:"repoId"`
	Repo         *repoJSON      `json:"repo,omitempty"` // (ext) the repository, in GET /api/sessions/{id} and the 201 of a create
	Title        string         `json:"title"`
	Metadata     map[string]any `json:"metadata"`
	Status       string         `json:"status"`
	Running      bool           `json:"running"`
	Queued       int            `json:"queued"` // (ext) prompts waiting behind the running turn in this server
	MessageCount int            `json:"messageCount"`
	Turns        int            `json:"turns"`
	ParentID     *string        `json:"parentId"`
	ChildCount   int            `json:"childCount"` // (ext) forks and sub-agents of this session
	CreatedAt    string         `json:"createdAt"`
	UpdatedAt    string         `json:"updatedAt"`
}

// sessionWithMessages is a session with all its messages.
type sessionWithMessages struct {
	sessionJSON
	Messages []messageJSON `json:"messages"`
}

// messageJSON is the JSON form of a message. Seq is the seq of the
// event that appended it, CreatedAt that event's time.
type messageJSON struct {
	ID         string             `json:"id"`
	Seq        int64              `json:"seq"`
	Role       string             `json:"role"`
	Content    any                `json:"content"`
	ToolCalls  []message.ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string             `json:"toolCallId,omitempty"`
	Name       string             `json:"name,omitempty"`
	IsError    bool               `json:"isError,omitempty"`
	Model      string             `json:"model,omitempty"`
	Usage      map[string]any     `json:"usage,omitempty"`
	Metadata   map[string]any     `json:"metadata,omitempty"`
	CreatedAt  string             `json:"createdAt"`
}

// formatTime writes a time as RFC 3339 in UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// strOf returns the string at key of m, or "".
func strOf(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// toSessionJSON converts a listing row.
func toSessionJSON(sum *sessions.Summary, running bool) sessionJSON {
	meta := sum.Metadata
	if meta == nil {
		meta = map[string]any{}
	}
	return sessionJSON{
		ID: sum.ID, Agent: optional(strOf(meta, metaAgent)), RepoID: optional(strOf(meta, metaRepoID)),
		Title: sum.Label(), Metadata: meta, Status: string(sum.Status), Running: running,
		MessageCount: sum.Length, Turns: sum.Turns, ParentID: optional(sum.ParentID), ChildCount: sum.Children,
		CreatedAt: formatTime(sum.CreatedAt), UpdatedAt: formatTime(sum.UpdatedAt),
	}
}

// summaryOf returns the listing row of a record whose message count is
// length (a record from Meta has no messages).
func summaryOf(rec *sessions.Record, length int) *sessions.Summary {
	return &sessions.Summary{ID: rec.ID, Status: rec.Status, CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt,
		ParentID: rec.ParentID, Length: length, Turns: rec.Turns, Children: len(rec.ChildIDs),
		Title: rec.Title, FirstPrompt: rec.FirstPrompt, Metadata: rec.Metadata}
}

// toMessagesJSON converts a record's messages, stamped from its event log.
func toMessagesJSON(rec *sessions.Record) []messageJSON {
	st := stamps(rec)
	out := make([]messageJSON, len(rec.Messages))
	for i := range rec.Messages {
		out[i] = toMessageJSON(&rec.Messages[i], st[i])
	}
	return out
}

// toMessageJSON converts a message appended by the event stamped st.
func toMessageJSON(m *message.Message, st stamp) messageJSON {
	var content any = m.Text
	if m.Blocks != nil {
		content = m.Blocks
	}
	return messageJSON{ID: m.ID, Seq: st.seq, Role: m.Role, Content: content, ToolCalls: m.ToolCalls,
		ToolCallID: m.ToolCallID, Name: m.Name, IsError: m.IsError, Model: m.Model, Usage: m.Usage,
		Metadata: m.Metadata, CreatedAt: formatTime(createdAt(m, st))}
}

// createdAt is a message's own time; a message without one (none is,
// since the store gives every message its time) gets its stamp's.
func createdAt(m *message.Message, st stamp) time.Time {
	if m.CreatedAt.IsZero() {
		return st.at
	}
	return m.CreatedAt
}

// stamp is when a message was appended: the seq and time of its
// "message" event.
type stamp struct {
	seq int64
	at  time.Time
}

// stamps returns the stamp of each of rec's current messages, replaying
// its event log: a "message" event at index k appends at k (cutting what
// a reset or rewind removed), a trim drops the oldest, and a compaction
// replaces the list with messages stamped by the compaction event. A
// message the log does not account for gets the session's creation.
func stamps(rec *sessions.Record) []stamp {
	var list []stamp
	for i := range rec.Events {
		e := &rec.Events[i]
		st := stamp{seq: e.Seq, at: e.Time}
		switch e.Type {
		case sessions.EventMessage:
			k, _ := e.Data["index"].(int64)
			if int(k) < len(list) {
				list = list[:k]
			}
			for len(list) < int(k) {
				list = append(list, st)
			}
			list = append(list, st)
		case sessions.EventReset:
			list = list[:0]
		case sessions.EventTrim:
			if d, ok := e.Data["dropped"].(int64); ok && int(d) <= len(list) {
				list = list[d:]
			}
		case agent.EventCompaction:
			n, _ := e.Data["messages_after"].(int64)
			list = list[:0]
			for range n {
				list = append(list, st)
			}
		}
	}
	n := len(rec.Messages)
	if len(list) > n {
		list = list[len(list)-n:]
	}
	for len(list) < n {
		list = append([]stamp{{at: rec.CreatedAt}}, list...)
	}
	return list
}
