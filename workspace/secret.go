package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
)

// Secret is an opaque secret value read from an environment variable. It
// renders as <secret NAME> through fmt (every verb and flag), JSON, text
// marshalling and slog, and this package reveals it only in HTTP header
// values and command environments. Code that needs the value calls
// Reveal, which is easy to search for.
//
// The value is held in a closure, out of reach of reflection: fmt prints
// a struct that holds a Secret in an unexported field by reflection,
// bypassing every method, and then shows a function address, not the
// value. (A plain string field would be printed as it is.) Secrets
// compare equal (==) only when they come from the same lookup.
type Secret struct {
	name string
	v    *secretValue
}

type secretValue struct{ get func() string }

func newSecretValue(s string) *secretValue {
	return &secretValue{get: func() string { return s }}
}

var (
	_ fmt.Formatter  = Secret{}
	_ fmt.Stringer   = Secret{}
	_ fmt.GoStringer = Secret{}
	_ json.Marshaler = Secret{}
	_ slog.LogValuer = Secret{}
)

// LookupSecret reads the environment variable name through getenv
// (os.LookupEnv if nil) as a Secret. An unset or empty variable is an
// error; the error never includes a value.
func LookupSecret(name string, getenv func(string) (string, bool)) (Secret, error) {
	if !validEnvName(name) {
		return Secret{}, fmt.Errorf("invalid environment variable name %q", name)
	}
	if getenv == nil {
		getenv = os.LookupEnv
	}
	v, ok := getenv(name)
	switch {
	case !ok:
		return Secret{}, fmt.Errorf("environment variable %q is not set", name)
	case v == "":
		return Secret{}, fmt.Errorf("environment variable %q is empty", name)
	}
	return Secret{name: name, v: newSecretValue(v)}, nil
}

// NewSecret returns a Secret holding value under name, for secrets that do
// not come from the environment (and for tests).
func NewSecret(name, value string) Secret {
	return Secret{name: name, v: newSecretValue(value)}
}

func validEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Name returns the secret's name (the environment variable).
func (s Secret) Name() string { return s.name }

// Reveal returns the secret's value. Use it only where the value must
// leave the process: an HTTP header, a command's environment.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return s.v.get()
}

// IsZero reports whether s is the zero Secret (holding nothing).
func (s Secret) IsZero() bool { return s.v == nil }

// String returns "<secret NAME>".
func (s Secret) String() string {
	if s.name == "" {
		return "<secret>"
	}
	return "<secret " + s.name + ">"
}

// GoString returns "<secret NAME>", for %#v.
func (s Secret) GoString() string { return s.String() }

// Format renders s as "<secret NAME>" for every verb (quoted for %q),
// so that no verb, flag or width can reach the value.
func (s Secret) Format(f fmt.State, verb rune) {
	text := s.String()
	if verb == 'q' {
		text = strconv.Quote(text)
	}
	if w, ok := f.Width(); ok && w > len(text) {
		pad := make([]byte, w-len(text))
		for i := range pad {
			pad[i] = ' '
		}
		if f.Flag('-') {
			text += string(pad)
		} else {
			text = string(pad) + text
		}
	}
	f.Write([]byte(text))
}

// MarshalJSON encodes s as the JSON string "<secret NAME>".
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalText returns "<secret NAME>", for encoders that use
// encoding.TextMarshaler (map keys, XML, ...).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue renders s as "<secret NAME>" in log/slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// UnmarshalJSON refuses to decode a Secret: secrets come from the
// environment, never from data.
func (s *Secret) UnmarshalJSON([]byte) error {
	return errors.New("a secret cannot be decoded from JSON")
}
