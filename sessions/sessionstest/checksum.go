package sessionstest

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
)

// Damage changes the stored bytes of the one message whose text contains
// marker, behind the backend's back (a flipped byte in a file page, an
// UPDATE that bypasses the backend), as a damaged disk or a hand edit
// would. The message is text only, so its stored body holds marker
// verbatim.
type Damage func(t *testing.T, path, marker string)

// RunChecksumTests checks that a durable backend stores a checksum with
// every message (sessions.Checksum) and verifies it on every load: after
// damage alters one stored message, loading the session, and a fork that
// shares the message, fails with sessions.ErrCorrupt naming the session
// and the message's index, never returning the altered text; other
// sessions and messages still load. open is as for RunDurableTests.
func RunChecksumTests(t *testing.T, open func(t *testing.T, path string) sessions.Backend, damage Damage) {
	const marker = "checksummed-text-0123456789"
	path := filepath.Join(t.TempDir(), "sessions.db")
	h := &harness{t: t, b: open(t, path)}
	closeFn := closeOnce(t, h.b)
	rec := newRecord("damaged", at(0))
	rec.Messages = []message.Message{user("first"), {Role: message.RoleAssistant, Text: "the " + marker}, user("third")}
	damaged := h.create(rec)
	h.fork(damaged, "fork", 3, at(1))
	intact := newRecord("intact", at(2))
	intact.Messages = []message.Message{user("untouched")}
	intact = h.create(intact)
	closeFn()

	damage(t, path, marker)

	h = &harness{t: t, b: open(t, path)}
	closeOnce(t, h.b)
	for _, id := range []string{"damaged", "fork"} {
		loads := map[string]func() ([]message.Message, error){
			"Load": func() ([]message.Message, error) {
				rec, err := h.b.Load(h.ctx(), id)
				if rec == nil {
					return nil, err
				}
				return rec.Messages, err
			},
		}
		if pl, ok := h.b.(sessions.PartialLoader); ok {
			loads["LoadTranscript"] = func() ([]message.Message, error) {
				rec, _, err := pl.LoadTranscript(h.ctx(), id)
				if rec == nil {
					return nil, err
				}
				return rec.Messages, err
			}
		}
		for name, load := range loads {
			msgs, err := load()
			h.wantErr(name+"("+id+") of a damaged message", err, sessions.ErrCorrupt, "'"+id+"'")
			if !strings.Contains(err.Error(), "message 1") {
				t.Errorf("%s(%s): %q does not name the damaged message's index (1)", name, id, err)
			}
			for _, m := range msgs {
				if strings.Contains(m.Text, "checksummed") && !strings.Contains(m.Text, marker) {
					t.Errorf("%s(%s) returned the altered text %q", name, id, m.Text)
				}
			}
		}
	}
	h.check(intact)
	if _, err := h.b.LoadMeta(h.ctx(), "damaged"); err != nil && !errors.Is(err, sessions.ErrCorrupt) {
		t.Errorf("LoadMeta of the damaged session: %v", err)
	}
}
