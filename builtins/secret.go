package builtins

// Secrets.
//
//	secret(name) -> secret
//
// A secret holds the value of an environment variable. It renders as
// <secret NAME> everywhere (str, repr, print, json.encode, formatting)
// and its value leaves the process only as an http header value or an
// exec environment variable. It never becomes data: a message, metadata,
// a tool result or an event holding one is refused (vm.FromStarlark). The
// one operation on it is concatenation with a string, which gives another
// secret: "Bearer " + secret("API_TOKEN").

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

// secretValue is the Starlark value of a workspace.Secret.
type secretValue struct{ s workspace.Secret }

var (
	_ vm.Secret          = secretValue{}
	_ starlark.HasBinary = secretValue{}
	_ starlark.HasAttrs  = secretValue{}
	_ json.Marshaler     = secretValue{} // what json.encode uses
)

func (v secretValue) String() string        { return v.s.String() }
func (v secretValue) Type() string          { return "secret" }
func (v secretValue) Freeze()               {}
func (v secretValue) Truth() starlark.Bool  { return true }
func (v secretValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: secret") }

// SecretName returns the name of the environment variable.
func (v secretValue) SecretName() string { return v.s.Name() }

// MarshalJSON encodes the placeholder "<secret NAME>", never the value,
// with < and > as they are (not \u003c), so the text reads as it prints.
func (v secretValue) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v.s.String()); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Attr exposes the secret's name.
func (v secretValue) Attr(name string) (starlark.Value, error) {
	if name == "name" {
		return starlark.String(v.s.Name()), nil
	}
	return nil, nil
}

// AttrNames lists the attributes.
func (v secretValue) AttrNames() []string { return []string{"name"} }

// Binary implements string + secret and secret + string: a secret with
// the concatenated value and the same name.
func (v secretValue) Binary(op syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	s, ok := y.(starlark.String)
	if op != syntax.PLUS || !ok {
		return nil, nil // unsupported: Starlark reports the operands' types
	}
	if side == starlark.Left {
		return secretValue{workspace.NewSecret(v.s.Name(), v.s.Reveal()+string(s))}, nil
	}
	return secretValue{workspace.NewSecret(v.s.Name(), string(s)+v.s.Reveal())}, nil
}

func secretBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name); err != nil {
		return nil, err
	}
	s, err := lookupSecret(thread, name)
	if err != nil {
		return nil, fail(b.Name(), err)
	}
	return secretValue{s}, nil
}

// lookupSecret reads the secret in the environment variable name and
// has the thread's store redact its value from then on.
func lookupSecret(thread *starlark.Thread, name string) (workspace.Secret, error) {
	s, err := workspace.LookupSecret(name, os.LookupEnv)
	if err != nil {
		return workspace.Secret{}, err
	}
	redactorOf(thread).Add(s.Name(), s.Reveal())
	return s, nil
}

// redactorOf returns the Redactor of the thread's store: the secrets a
// script looks up are replaced by "<secret NAME>" in what comes back from
// commands and servers and in everything stored. It is nil (redacting
// nothing) on a thread without a VM.
func redactorOf(thread *starlark.Thread) *message.Redactor {
	st, err := vm.StateOf(thread)
	if err != nil {
		return nil
	}
	return st.Store.Redactor()
}

// secretMap converts a dict of names to strings or secrets (http headers,
// exec env) into the plain and the secret entries. A string holding a
// secret's placeholder is refused: it comes from formatting a secret
// ("Bearer %s" % key) and would send "<secret KEY>" instead of the value.
func secretMap(fn, param string, v starlark.Value) (map[string]string, map[string]workspace.Secret, error) {
	if v == nil || v == starlark.None {
		return nil, nil, nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, nil, fmt.Errorf("%s: for parameter %s: got %s, want dict", fn, param, v.Type())
	}
	plain := map[string]string{}
	secrets := map[string]workspace.Secret{}
	for _, item := range d.Items() {
		k, ok := item[0].(starlark.String)
		if !ok {
			return nil, nil, fmt.Errorf("%s: %s: key %s is a %s, want string", fn, param, item[0], item[0].Type())
		}
		switch x := item[1].(type) {
		case starlark.String:
			if strings.Contains(string(x), "<secret ") {
				return nil, nil, fmt.Errorf("%s: %s[%q] holds a secret's placeholder, not its value: build it with + (\"Bearer \" + secret(...)), not by formatting", fn, param, string(k))
			}
			plain[string(k)] = string(x)
		case secretValue:
			secrets[string(k)] = x.s
		default:
			return nil, nil, fmt.Errorf("%s: %s[%q]: got %s, want string or secret", fn, param, string(k), item[1].Type())
		}
	}
	return plain, secrets, nil
}
