package llm

import (
	"fmt"
	"slices"
	"sync"

	"github.com/skein-dev/skein/sessions"
)

// WireCache keeps the wire forms of a conversation's messages between its
// model calls, per protocol, so that building a request encodes only the
// messages that are new since the previous call: O(new messages) plus a
// copy, however long the conversation. An agent loop puts one in every
// Request it sends (Request.Cache); a nil cache caches nothing.
//
// Messages are immutable, and a message keeps its address while it stays
// in its transcript (sessions.Transcript appends past it, and a reset,
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
	msgs  []*sessions.Message
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
func WireForms[T any](c *WireCache, protocol string, msgs []sessions.Message, encode func(msgs []sessions.Message, i int) (T, error)) ([]T, error) {
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
	i := 0
	for i < len(msgs) && i < len(cached.msgs) && cached.msgs[i] == &msgs[i] {
		i++
	}
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
	addrs := cached.msgs[:i]
	for j := i; j < len(msgs); j++ {
		addrs = append(addrs, &msgs[j])
	}
	cached.msgs, cached.forms = addrs, forms
	if c != nil {
		if c.forms == nil {
			c.forms = map[string]any{}
		}
		c.forms[protocol] = cached
	}
	return forms, nil
}

// MessageError is an error encoding message Index of a request.
type MessageError struct {
	Index int
	Err   error
}

func (e *MessageError) Error() string { return fmt.Sprintf("message %d: %v", e.Index, e.Err) }

// Unwrap returns Err.
func (e *MessageError) Unwrap() error { return e.Err }
