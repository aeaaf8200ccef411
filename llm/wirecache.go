package llm

import (
	"fmt"
	"slices"
	"sync"

	"github.com/skein-dev/skein/sessions/message"
)

// WireCache keeps the wire forms of a conversation's messages between its
// model calls, per protocol, so that building a request encodes only the
// messages that are new since the previous call: O(new messages) plus a
// copy, however long the conversation. An agent loop puts one in every
// Request it sends (Request.Cache); a nil cache caches nothing.
//
// Messages are immutable, and a message keeps its address while it stays
// in its transcript (message.Transcript appends past it, and a reset,
// rewind or reallocation makes new messages at new addresses). So a
// message at the same position and address as in the previous call of the
// same protocol is the same message, and its wire form is reused; the
// first message that differs and all after it are encoded again.
//
// A provider package caches whatever form it builds a request from (the
// encoded JSON of the message, or a role and its content blocks) with
// WireForms, under its protocol's name. A form may depend on the message
// and on the messages before it (a form is reused only while all of those
// are unchanged), never on the messages after it or on its being last:
// what depends on those (merging turns, cache breakpoints) is done when
// the request is assembled.
type WireCache struct {
	mu    sync.Mutex
	forms map[string]any // protocol -> *wireForms[T]
}

// wireForms are the messages of the previous call of one protocol, by
// address, and their forms.
type wireForms[T any] struct {
	msgs  []*message.Message
	forms []T
}

// WireForms returns the wire form of each of msgs under protocol: the
// cached form for each message of the previous call of the same protocol
// at the same position and address (and so with the same messages before
// it), encode(msgs, i) for the others, in order. The result is the
// cache's: the caller must not modify it. It stays valid after later
// calls (which never overwrite a form they return). With
// a nil cache every message is encoded. An error of encode is returned
// with the message's index (a *MessageError).
func WireForms[T any](c *WireCache, protocol string, msgs []message.Message, encode func(msgs []message.Message, i int) (T, error)) ([]T, error) {
	cached := &wireForms[T]{}
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if prev, ok := c.forms[protocol].(*wireForms[T]); ok {
			cached = prev
		}
	}
	// Keep the forms of the common prefix, encode the rest; the cache's
	// slices are reused, so a call allocates only for the new messages.
	i := commonPrefix(cached.msgs, msgs)
	forms := cached.forms[:i]
	if i < len(cached.forms) {
		// A request body may still be reading the forms the previous
		// call returned (a transport can write a body after the reply
		// came): never overwrite them, append to a new array.
		forms = slices.Clip(forms)
	}
	for j := i; j < len(msgs); j++ {
		form, err := encode(msgs, j)
		if err != nil {
			cached.msgs, cached.forms = cached.msgs[:i], forms[:i]
			return nil, &MessageError{Index: j, Err: err}
		}
		forms = append(forms, form)
	}
	cached.msgs, cached.forms = appendAddrs(cached.msgs[:i], msgs[i:]), forms
	c.keep(protocol, cached)
	return forms, nil
}

// commonPrefix returns how many of msgs are at the addresses of cached, in
// order from the first.
func commonPrefix(cached []*message.Message, msgs []message.Message) int {
	i := 0
	for i < len(msgs) && i < len(cached) && cached[i] == &msgs[i] {
		i++
	}
	return i
}

// appendAddrs appends the addresses of msgs to addrs.
func appendAddrs(addrs []*message.Message, msgs []message.Message) []*message.Message {
	for j := range msgs {
		addrs = append(addrs, &msgs[j])
	}
	return addrs
}

// keep stores the forms of protocol's last call; c's lock is held (a nil
// c keeps nothing).
func (c *WireCache) keep(protocol string, forms any) {
	if c == nil {
		return
	}
	if c.forms == nil {
		c.forms = map[string]any{}
	}
	c.forms[protocol] = forms
}

// joinedForms are the messages of the previous call of one protocol, by
// address, and their forms joined by commas in one buffer: ends[i] is the
// length of buf up to the end of message i's form.
type joinedForms struct {
	msgs []*message.Message
	ends []int
	buf  []byte
}

// WireJoined is WireForms for a protocol whose forms are elements of one
// JSON array (a message's form may be several elements joined by commas,
// or empty for none): it returns the non-empty forms of msgs joined by
// commas, in one slice. The cache keeps a conversation's forms contiguous
// in one buffer, each new form appended once, so a request body holds the
// whole history as one piece, copied to the connection in one go rather
// than message by message. The buffer grows by doubling (a reset or
// rewind starts a new one at the first form that changed), so a
// conversation's forms are copied about twice in all, not once per call.
// The result is the cache's: the caller must not modify it; it stays
// valid after later calls, which never write over the bytes of a slice
// they returned. An error of encode is returned with the message's index
// (a *MessageError).
func WireJoined(c *WireCache, protocol string, msgs []message.Message, encode func(msgs []message.Message, i int) ([]byte, error)) ([]byte, error) {
	cached := &joinedForms{}
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if prev, ok := c.forms[protocol].(*joinedForms); ok {
			cached = prev
		}
	}
	i := commonPrefix(cached.msgs, msgs)
	end := 0
	if i > 0 {
		end = cached.ends[i-1]
	}
	buf, ends := cached.buf[:end], cached.ends[:i]
	if i < len(cached.msgs) {
		// An earlier result may hold the bytes after end: append to a
		// new array.
		buf = slices.Clip(buf)
	}
	for j := i; j < len(msgs); j++ {
		form, err := encode(msgs, j)
		if err != nil {
			cached.msgs, cached.ends, cached.buf = cached.msgs[:i], ends[:i], buf[:end]
			return nil, &MessageError{Index: j, Err: err}
		}
		if len(form) > 0 {
			if need := len(buf) + 1 + len(form); need > cap(buf) {
				buf = append(make([]byte, 0, max(2*cap(buf), need, 512)), buf...)
			}
			if len(buf) > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, form...)
		}
		ends = append(ends, len(buf))
	}
	cached.msgs, cached.ends, cached.buf = appendAddrs(cached.msgs[:i], msgs[i:]), ends, buf
	c.keep(protocol, cached)
	return buf, nil
}

// MessageError is an error encoding message Index of a request.
type MessageError struct {
	Index int
	Err   error
}

func (e *MessageError) Error() string { return fmt.Sprintf("message %d: %v", e.Index, e.Err) }

// Unwrap returns Err.
func (e *MessageError) Unwrap() error { return e.Err }
