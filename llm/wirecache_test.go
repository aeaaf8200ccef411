package llm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/sessions/message"
)

// wireStep is a call of TestWireForms and TestWireJoined: protocol's
// forms of msgs() with cache, of which encodes are new.
type wireStep struct {
	name     string
	protocol string
	msgs     func() []message.Message
	cache    *WireCache
	encodes  int
}

// wireSteps returns the calls TestWireForms and TestWireJoined make, in
// order: the same position and address reuse a form, anything else (a
// new array, another protocol, no cache) encodes.
func wireSteps(c *WireCache) []wireStep {
	msgs := make([]message.Message, 0, 10)
	for i := range 3 {
		msgs = append(msgs, message.Message{Role: message.RoleUser, Text: fmt.Sprint(i)})
	}
	return []wireStep{
		{"first call", "p", func() []message.Message { return msgs }, c, 3},
		{"same messages", "p", func() []message.Message { return msgs }, c, 0},
		{"two appended, one without text", "p", func() []message.Message {
			msgs = append(msgs, message.Message{}, message.Message{Text: "4"})
			return msgs
		}, c, 2},
		{"fewer messages", "p", func() []message.Message { return msgs[:2] }, c, 0},
		{"grown again", "p", func() []message.Message { return msgs }, c, 3},
		{"another protocol", "q", func() []message.Message { return msgs }, c, 5},
		{"back to the first", "p", func() []message.Message { return msgs }, c, 0},
		{"a copy (new addresses)", "p", func() []message.Message { return append([]message.Message(nil), msgs...) }, c, 5},
		{"no cache", "p", func() []message.Message { return msgs }, nil, 5},
		{"none", "r", func() []message.Message { return nil }, c, 0},
	}
}

// TestWireForms checks that only messages new since the previous call of
// a protocol are encoded (wireSteps) and that every form is the message's.
func TestWireForms(t *testing.T) {
	encoded := 0
	enc := func(ms []message.Message, i int) (string, error) {
		encoded++
		return ms[i].Text, nil
	}
	c := &WireCache{}
	steps := wireSteps(c)
	for _, s := range steps {
		encoded = 0
		in := s.msgs()
		forms, err := WireForms(s.cache, s.protocol, in, enc)
		if err != nil {
			t.Fatal(err)
		}
		if encoded != s.encodes {
			t.Errorf("%s: %d messages encoded, want %d", s.name, encoded, s.encodes)
		}
		for i := range in {
			if forms[i] != in[i].Text {
				t.Fatalf("%s: form %d is %q, want %q", s.name, i, forms[i], in[i].Text)
			}
		}
	}
	bad := errors.New("bad")
	_, err := WireForms(c, "p", []message.Message{{Text: "new"}}, func([]message.Message, int) (string, error) { return "", bad })
	var me *MessageError
	if !errors.As(err, &me) || me.Index != 0 || !errors.Is(err, bad) || err.Error() != "message 0: bad" {
		t.Fatalf("encode error: %v", err)
	}
}

// TestWireFormsKeepsReturnedForms checks that a call never overwrites the
// forms an earlier call returned, even when the conversation was reset to
// a shorter one and grows again: a request body built from them may still
// be sending.
func TestWireFormsKeepsReturnedForms(t *testing.T) {
	enc := func(msgs []message.Message, i int) (string, error) { return msgs[i].Text, nil }
	msgs := make([]message.Message, 0, 10)
	for i := range 4 {
		msgs = append(msgs, message.Message{Role: message.RoleUser, Text: fmt.Sprint(i)})
	}
	c := &WireCache{}
	first, err := WireForms(c, "p", msgs, enc)
	if err != nil {
		t.Fatal(err)
	}
	// Rewound to two messages, then two new ones at new addresses.
	reset := append(append([]message.Message(nil), msgs[:2]...), message.Message{Text: "x"}, message.Message{Text: "y"})
	if _, err := WireForms(c, "p", reset[:2], enc); err != nil {
		t.Fatal(err)
	}
	if _, err := WireForms(c, "p", reset, enc); err != nil {
		t.Fatal(err)
	}
	for i, f := range first {
		if f != fmt.Sprint(i) {
			t.Errorf("form %d of the first call became %q", i, f)
		}
	}
}

// TestWireJoined checks WireJoined as TestWireForms checks WireForms:
// only the messages new since the previous call are encoded, and the
// result is the non-empty forms joined by commas, whatever was cached.
func TestWireJoined(t *testing.T) {
	encoded := 0
	enc := func(ms []message.Message, i int) ([]byte, error) {
		encoded++
		return []byte(ms[i].Text), nil
	}
	joined := func(ms []message.Message) string {
		var parts []string
		for _, m := range ms {
			if m.Text != "" {
				parts = append(parts, m.Text)
			}
		}
		return strings.Join(parts, ",")
	}
	c := &WireCache{}
	steps := wireSteps(c)
	for _, s := range steps {
		encoded = 0
		in := s.msgs()
		got, err := WireJoined(s.cache, s.protocol, in, enc)
		if err != nil {
			t.Fatal(err)
		}
		if encoded != s.encodes {
			t.Errorf("%s: %d messages encoded, want %d", s.name, encoded, s.encodes)
		}
		if want := joined(in); string(got) != want {
			t.Fatalf("%s: joined forms %q, want %q", s.name, got, want)
		}
	}
	msgs := make([]message.Message, 5, 10)
	if _, err := WireJoined(c, "p", msgs, enc); err != nil {
		t.Fatal(err)
	}
	more := append(msgs, message.Message{Text: "5"}) // in place: the first five keep their addresses
	bad := errors.New("bad")
	_, err := WireJoined(c, "p", more, func(ms []message.Message, i int) ([]byte, error) { return nil, bad })
	var me *MessageError
	if !errors.As(err, &me) || me.Index != 5 || !errors.Is(err, bad) {
		t.Fatalf("encode error: %v", err)
	}
	// After the error the cache still holds the first five forms.
	encoded = 0
	if got, err := WireJoined(c, "p", more, enc); err != nil || string(got) != joined(more) || encoded != 1 {
		t.Fatalf("after an error: %q, %v, %d encoded", got, err, encoded)
	}
}

// TestWireJoinedKeepsReturnedForms checks that a call never writes over
// the bytes an earlier call returned, whether the conversation grows in
// place or was reset to a shorter one that grows again: a request body
// built from them may still be sending.
func TestWireJoinedKeepsReturnedForms(t *testing.T) {
	enc := func(msgs []message.Message, i int) ([]byte, error) { return []byte(msgs[i].Text), nil }
	msgs := make([]message.Message, 0, 100)
	for i := range 4 {
		msgs = append(msgs, message.Message{Role: message.RoleUser, Text: fmt.Sprint(i)})
	}
	c := &WireCache{}
	first, err := WireJoined(c, "p", msgs, enc)
	if err != nil {
		t.Fatal(err)
	}
	want := string(first)
	// Rewound to two messages, then two new ones at new addresses.
	reset := append(append([]message.Message(nil), msgs[:2]...), message.Message{Text: "x"}, message.Message{Text: "y"})
	if _, err := WireJoined(c, "p", reset[:2], enc); err != nil {
		t.Fatal(err)
	}
	second, err := WireJoined(c, "p", reset, enc)
	if err != nil {
		t.Fatal(err)
	}
	if string(first) != want || string(second) != "0,1,x,y" {
		t.Fatalf("after a reset: first %q (was %q), second %q", first, want, second)
	}
	// Grown in place, past the buffer's capacity more than once.
	for i := range 90 {
		reset = append(reset, message.Message{Text: fmt.Sprint("m", i)})
		if _, err := WireJoined(c, "p", reset, enc); err != nil {
			t.Fatal(err)
		}
	}
	if string(first) != want || string(second) != "0,1,x,y" {
		t.Fatalf("after growing: first %q (was %q), second %q", first, want, second)
	}
}
