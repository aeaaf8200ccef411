package sessionstest

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// checkPartial fails the test unless a sessions.PartialLoader backend's
// LoadTranscript and LoadEvents agree with want (h.check calls it for
// every check, so every test of the suite covers them).
func (h *harness) checkPartial(want *sessions.Record) {
	h.t.Helper()
	pl, ok := h.b.(sessions.PartialLoader)
	if !ok {
		return
	}
	got, lastSeq, err := pl.LoadTranscript(h.ctx(), want.ID)
	if err != nil {
		h.t.Fatalf("LoadTranscript(%q): %v", want.ID, err)
	}
	if len(got.Events) != 0 {
		h.t.Fatalf("LoadTranscript(%q) returned %d events, want none", want.ID, len(got.Events))
	}
	w := cloneRecord(want)
	w.Events = nil
	if d := diffRecord(got, w); len(d) > 0 {
		h.t.Fatalf("LoadTranscript(%q) differs:\n%s", want.ID, strings.Join(d, "\n"))
	}
	wantSeq := int64(0)
	if n := len(want.Events); n > 0 {
		wantSeq = want.Events[n-1].Seq
	}
	if lastSeq != wantSeq {
		h.t.Fatalf("LoadTranscript(%q): last seq %d, want %d", want.ID, lastSeq, wantSeq)
	}
	events, err := pl.LoadEvents(h.ctx(), want.ID)
	if err != nil {
		h.t.Fatalf("LoadEvents(%q): %v", want.ID, err)
	}
	if d := diffEvents(events, want.Events); len(d) > 0 {
		h.t.Fatalf("LoadEvents(%q) differs:\n%s", want.ID, strings.Join(d, "\n"))
	}
}

func testPartialNotFound(h *harness) {
	pl, ok := h.b.(sessions.PartialLoader)
	if !ok {
		h.t.Skip("not a sessions.PartialLoader")
	}
	_, _, err := pl.LoadTranscript(h.ctx(), "nope")
	h.wantErr("LoadTranscript", err, sessions.ErrNotFound, "nope")
	_, err = pl.LoadEvents(h.ctx(), "nope")
	h.wantErr("LoadEvents", err, sessions.ErrNotFound, "nope")
}

// appendLogged returns the Change the store makes to append msgs to
// want's session: one "message" event per message, as the store logs
// them, then extra events.
func appendLogged(want *sessions.Record, when time.Time, base int, msgs []message.Message, extra ...sessions.Event) *sessions.Change {
	var events []sessions.Event
	for i, m := range msgs {
		events = append(events, sessions.Event{Type: sessions.EventMessage, CorrID: m.ToolCallID,
			Data: map[string]any{"index": int64(base + i), "role": m.Role}})
	}
	events = append(events, extra...)
	return &sessions.Change{Append: msgs, Events: stamp(want, when, events...), UpdatedAt: when}
}

// history tracks what LoadAppended must return for one session.
type history map[int64]message.Message

// note records the messages that ch's "message" events appended, when ch
// pairs them with its Append one to one.
func (hist history) note(ch *sessions.Change) {
	var seqs []int64
	for _, e := range ch.Events {
		if e.Type == sessions.EventMessage {
			seqs = append(seqs, e.Seq)
		}
	}
	if len(seqs) != len(ch.Append) {
		return
	}
	for k, seq := range seqs {
		hist[seq] = ch.Append[k]
	}
}

// checkHistory fails the test unless LoadAppended of want's session
// returns hist.
func (h *harness) checkHistory(hb sessions.HistoryBackend, want *sessions.Record, hist history) {
	h.t.Helper()
	got, err := hb.LoadAppended(h.ctx(), want.ID)
	if err != nil {
		h.t.Fatalf("LoadAppended(%q): %v", want.ID, err)
	}
	if !reflect.DeepEqual(map[int64]message.Message(hist), got) && (len(hist) > 0 || len(got) > 0) {
		h.t.Fatalf("LoadAppended(%q): got seqs %v, want %v\n\tgot  %v\n\twant %v", want.ID,
			slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(hist)), got, hist)
	}
}

// testHistory checks a sessions.HistoryBackend: every message a write
// appended with its "message" event stays readable by that event's seq
// after trims, resets, compactions and forks, and CreateWithHistory
// restores such a history.
func testHistory(h *harness) {
	hb, ok := h.b.(sessions.HistoryBackend)
	if !ok {
		h.t.Skip("not a sessions.HistoryBackend")
	}
	ctx := h.ctx()
	want := h.create(newRecord("h", at(0)))
	hist := history{}
	step := func(ch *sessions.Change) {
		h.t.Helper()
		hist.note(ch)
		h.write(want, ch)
		h.checkHistory(hb, want, hist)
	}
	step(appendLogged(want, at(1), 0, users("a", 3)))
	step(appendLogged(want, at(2), 3, richMessages()))
	// A trim, then an append in the same write.
	trim := appendLogged(want, at(3), len(want.Messages)-4, users("b", 1), sessions.Event{Type: sessions.EventTrim})
	trim.DropFirst = 4
	step(trim)
	// A compaction: the replacement messages have no events.
	compaction := appendLogged(want, at(4), 2, users("c", 2), sessions.Event{Type: sessions.EventContextCompacted})
	compaction.Replace, compaction.ReplaceWith = true, users("summary", 2)
	step(compaction)
	// A reset, then appends.
	step(&sessions.Change{Replace: true, Events: stamp(want, at(5), sessions.Event{Type: sessions.EventReset})})
	step(appendLogged(want, at(6), 0, users("d", 2)))
	// A rewind drops the newest messages from the view, not from history;
	// an append after it (in the same write) is recorded.
	rewind := appendLogged(want, at(6), 1, users("r", 1), sessions.Event{Type: "rewind"})
	rewind.DropLast = 2
	step(rewind)
	step(&sessions.Change{DropLast: 1, Events: stamp(want, at(6), sessions.Event{Type: "rewind"})})
	step(appendLogged(want, at(6), 0, users("d2", 2)))
	// Writes that do not pair events with messages record nothing.
	unpaired := appendLogged(want, at(7), 2, users("e", 2))
	unpaired.Events = unpaired.Events[:1]
	step(unpaired)
	step(&sessions.Change{Events: stamp(want, at(8), sessions.Event{Type: sessions.EventMessage})})
	if len(hist) != 3+len(richMessages())+1+2+2+1+2 {
		h.t.Fatalf("the test recorded %d messages", len(hist))
	}

	// A fork records only its own appends; its source keeps its history.
	child := h.fork(want, "h-child", 3, at(9))
	childHist := history{}
	ch := appendLogged(child, at(10), 3, users("f", 2))
	childHist.note(ch)
	h.write(child, ch)
	h.checkHistory(hb, child, childHist)
	h.checkHistory(hb, want, hist)

	// CreateWithHistory restores a history beside the current messages.
	rec := cloneRecord(want)
	rec.ID, rec.ChildIDs, rec.Version = "h-copy", nil, 0
	for i := range rec.Events {
		rec.Events[i].SessionID = rec.ID
	}
	if err := hb.CreateWithHistory(ctx, cloneRecord(rec), hist); err != nil {
		h.t.Fatalf("CreateWithHistory: %v", err)
	}
	h.check(rec)
	h.checkHistory(hb, rec, hist)
	rec2 := cloneRecord(rec)
	rec2.ID = "h-copy2"
	bad := history{rec.Events[len(rec.Events)-1].Seq + 100: user("x")}
	err := hb.CreateWithHistory(ctx, rec2, bad)
	if err == nil {
		h.t.Fatal("CreateWithHistory with a seq that names no event: no error")
	}
	var notMessage int64
	for _, e := range rec.Events {
		if e.Type != sessions.EventMessage {
			notMessage = e.Seq
			break
		}
	}
	if err := hb.CreateWithHistory(ctx, rec2, history{notMessage: user("x")}); err == nil {
		h.t.Fatalf("CreateWithHistory with the seq %d of an event that is not a message event: no error", notMessage)
	}
	if ok, err := h.b.Exists(ctx, rec2.ID); err != nil || ok {
		h.t.Fatalf("a failed CreateWithHistory stored its session: %v, %v", ok, err)
	}
	_, err = hb.LoadAppended(ctx, "nope")
	h.wantErr("LoadAppended", err, sessions.ErrNotFound, "nope")
	if err := h.b.Delete(ctx, child.ID, false); err != nil {
		h.t.Fatal(err)
	}
	h.checkHistory(hb, want, hist)
}
