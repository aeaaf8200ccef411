package rowstore

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/storekey"
)

// Payloads: what a session stores besides its filter columns (status,
// times, parent, view), each either sealed with the backend's store key
// (package storekey) or, without a key, stored plain with its checksum
// (sessions.Checksum). Which one a value is, is told by the value itself
// or by its checksum column:
//
//   - JSON payloads (message bodies, event data, metadata): a plain one
//     is its JSON object ('{' first); a sealed one is a JSON string
//     holding the base64 of its envelope ('"' first), so the stored
//     value is JSON either way and a column computed from it reads a
//     sealed object as no object (NULL).
//   - text payloads (title, summary, first prompt): the base64 of the
//     envelope, and no checksum (its column NULL); a plain one has its
//     checksum, or LegacySum.
//
// A sealed value carries no checksum: GCM's tag is its integrity check.

// LegacySum is the checksum column of a plain text or metadata value
// stored before the backend kept checksums (a migration sets it): the
// value is read unchecked.
const LegacySum = -1

// Payload field names: the additional data a value is sealed with, and
// how errors name it.
const (
	FieldTitle       = "title"
	FieldSummary     = "summary"
	FieldFirstPrompt = "first_prompt"
	FieldMetadata    = "metadata"
	FieldMessage     = "message"
	FieldEvent       = "event data"
)

// Stored is one payload's stored form: its column's text (nil: NULL) and
// its checksum column (nil for NULL and for a sealed value).
type Stored struct {
	Text *string
	Sum  *int64
}

// sum returns the checksum column value of data.
func sum(data []byte) *int64 {
	s := int64(sessions.Checksum(data))
	return &s
}

// EncodeText returns the stored form of text payload field whose value is
// s (nil: none): sealed with k, or plain with its checksum when k is nil.
func EncodeText(k *storekey.Key, field string, s *string) Stored {
	if s == nil {
		return Stored{}
	}
	if k == nil {
		return Stored{s, sum([]byte(*s))}
	}
	t := base64.StdEncoding.EncodeToString(k.Seal(field, []byte(*s)))
	return Stored{Text: &t}
}

// DecodeText returns text payload field's value from its stored text
// (nil: none) and checksum column, checking the checksum of a plain value
// and opening a sealed one with k.
func DecodeText(k *storekey.Key, field string, text *string, sum *int64) (string, error) {
	if text == nil {
		return "", nil
	}
	if sum != nil {
		if *sum != LegacySum {
			if err := sessions.VerifyFieldChecksum(field, []byte(*text), uint32(*sum)); err != nil {
				return "", err
			}
		}
		return *text, nil
	}
	plain, err := openBase64(k, field, field, []byte(*text))
	return string(plain), err
}

// EncodeJSON returns the stored form of JSON payload field, data: sealed
// with k (a JSON string, no checksum), or data itself with its checksum
// when k is nil.
func EncodeJSON(k *storekey.Key, field string, data []byte) (string, *int64) {
	if k == nil {
		return string(data), sum(data)
	}
	env := k.Seal(field, data)
	out := make([]byte, 0, base64.StdEncoding.EncodedLen(len(env))+2)
	out = append(out, '"')
	out = base64.StdEncoding.AppendEncode(out, env)
	return string(append(out, '"')), nil
}

// IsSealedJSON reports whether stored, a JSON payload's stored form, is
// sealed.
func IsSealedJSON(stored []byte) bool { return len(stored) > 0 && stored[0] == '"' }

// DecodeJSON returns JSON payload field's JSON from its stored form:
// opened with k when sealed, else checked against sum (nil: unchecked,
// LegacySum too). Errors name the value label ("metadata", "event 12
// data").
func DecodeJSON(k *storekey.Key, field, label string, stored []byte, sum *int64) ([]byte, error) {
	if IsSealedJSON(stored) {
		if len(stored) < 2 || stored[len(stored)-1] != '"' {
			return nil, fmt.Errorf("%s: %w: a sealed value is cut short", label, sessions.ErrCorrupt)
		}
		return openBase64(k, field, label, stored[1:len(stored)-1])
	}
	if sum != nil && *sum != LegacySum {
		if err := sessions.VerifyFieldChecksum(label, stored, uint32(*sum)); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

// openBase64 opens the sealed value of field whose envelope's base64 is
// text; errors name it label.
func openBase64(k *storekey.Key, field, label string, text []byte) ([]byte, error) {
	env, err := base64.StdEncoding.AppendDecode(nil, text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: a sealed value is not base64 (%v)", label, sessions.ErrCorrupt, err)
	}
	id, err := storekey.EnvelopeID(env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, corrupt(err))
	}
	if k == nil {
		return nil, fmt.Errorf("%s: %w (key id %s): give the store's key with --encryption-key-file or SKEIN_STORE_KEY_FILE", label, storekey.ErrNoKey, id)
	}
	plain, err := k.Open(field, env)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, corrupt(err))
	}
	return plain, nil
}

// ResealText returns text payload field, stored as text and sum, stored
// anew with to: checked when plain, or opened with from, or with to when
// it is sealed with to already (a rotation run again).
func ResealText(from, to *storekey.Key, field string, text *string, sum *int64) (Stored, error) {
	if text == nil {
		return Stored{}, nil
	}
	plain, err := DecodeText(from, field, text, sum)
	if errors.Is(err, storekey.ErrWrongKey) || (from == nil && errors.Is(err, storekey.ErrNoKey)) {
		plain, err = DecodeText(to, field, text, sum)
	}
	if err != nil {
		return Stored{}, err
	}
	return EncodeText(to, field, &plain), nil
}

// ResealJSON is ResealText for a JSON payload; label names it in errors.
func ResealJSON(from, to *storekey.Key, field, label string, stored []byte, sum *int64) (Stored, error) {
	if stored == nil {
		return Stored{}, nil
	}
	data, err := DecodeJSON(from, field, label, stored, sum)
	if errors.Is(err, storekey.ErrWrongKey) || (from == nil && errors.Is(err, storekey.ErrNoKey)) {
		data, err = DecodeJSON(to, field, label, stored, sum)
	}
	if err != nil {
		return Stored{}, err
	}
	text, s := EncodeJSON(to, field, data)
	return Stored{&text, s}, nil
}

// ResealSession is ResealText and ResealJSON of a session row's payloads,
// as StoredSession holds them, into a SessionRow's fields (the others
// left zero).
func ResealSession(from, to *storekey.Key, s *StoredSession) (*SessionRow, error) {
	r := &SessionRow{}
	var err error
	if r.Summary, err = ResealText(from, to, FieldSummary, s.Summary, s.SummarySum); err != nil {
		return nil, err
	}
	if r.Title, err = ResealText(from, to, FieldTitle, s.Title, s.TitleSum); err != nil {
		return nil, err
	}
	if r.FirstPrompt, err = ResealText(from, to, FieldFirstPrompt, s.FirstPrompt, s.FirstPromptSum); err != nil {
		return nil, err
	}
	if r.Metadata, err = ResealJSON(from, to, FieldMetadata, FieldMetadata, s.Metadata, s.MetadataSum); err != nil {
		return nil, err
	}
	return r, nil
}

// ResealBody returns message row body (index names it in errors), with
// its checksum column sum, stored anew with to (see ResealText).
func ResealBody(from, to *storekey.Key, index int, body []byte, sum *int64) (Body, error) {
	if err := Verify(index, body, sum); err != nil {
		return Body{}, err
	}
	re, err := ResealJSON(from, to, FieldMessage, fmt.Sprintf("message row %d", index), body, nil)
	if err != nil {
		return Body{}, err
	}
	if re.Sum == nil {
		return Body{JSON: *re.Text, Sealed: true}, nil
	}
	return Body{JSON: *re.Text, Sum: uint32(*re.Sum)}, nil
}

// corrupt marks a sealed value that does not open as sessions.ErrCorrupt
// too, unless it only needs another key.
func corrupt(err error) error {
	if errors.Is(err, storekey.ErrDamaged) {
		return fmt.Errorf("%w: %w", sessions.ErrCorrupt, err)
	}
	return err
}

// Workflow run records' payloads: the header and each step's record, JSON
// objects sealed like the other JSON payloads. They have no checksum
// column: a plain one is stored as it is.
const (
	FieldRunHead = "run head"
	FieldRunStep = "run step"
)

// EncodeRun returns the stored form of a run record's JSON payload field
// (FieldRunHead, FieldRunStep): sealed with k, or data itself.
func EncodeRun(k *storekey.Key, field string, data []byte) string {
	text, _ := EncodeJSON(k, field, data)
	return text
}

// DecodeRun returns a run record's JSON payload field from its stored
// form, opened with k when it is sealed; errors name the run and label.
func DecodeRun(k *storekey.Key, field, run, label string, stored []byte) ([]byte, error) {
	data, err := DecodeJSON(k, field, label, stored, nil)
	if err != nil {
		return nil, fmt.Errorf("run '%s': %w", sessions.Escape(run), err)
	}
	return data, nil
}

// ResealRun returns a run record's stored JSON payload stored anew with
// to (see ResealText).
func ResealRun(from, to *storekey.Key, field, run, label string, stored []byte) (string, error) {
	re, err := ResealJSON(from, to, field, label, stored, nil)
	if err != nil {
		return "", fmt.Errorf("run '%s': %w", sessions.Escape(run), err)
	}
	return *re.Text, nil
}
