package mcp

import (
	"fmt"
	"strings"
	"time"

	"github.com/skein-dev/skein/internal/didyoumean"
	"github.com/skein-dev/skein/internal/jsonvalue"
	"github.com/skein-dev/skein/workspace"
)

// settingKeys are the keys of a server's settings in a file.
var settingKeys = []string{"command", "env", "headers", "prefix", "timeout_s", "url"}

// ParseSettings reads the settings of the server called name as a file
// gives them (an agent file's mcp_servers entry), decoded JSON or YAML:
//
//	command: [argv...]          # a stdio server, or
//	url: https://...            # a Streamable HTTP server
//	env: {NAME: value}          # stdio; a value {secret: VAR} is the secret in $VAR
//	headers: {Name: value}      # url; values as for env
//	timeout_s: 30
//	prefix: fs_
//
// secret looks up a secret by its variable's name. Unknown keys and
// values of the wrong type are errors naming them.
func ParseSettings(name string, settings map[string]any, secret func(string) (workspace.Secret, error)) (Spec, error) {
	spec := Spec{Name: name}
	for _, k := range sortedKeys(settings) {
		v := settings[k]
		var err error
		switch k {
		case "command":
			spec.Command, err = stringList(v)
			if spec.Command == nil && err == nil {
				spec.Command = []string{}
			}
		case "url":
			spec.URL, err = str(v)
		case "prefix":
			spec.Prefix, err = str(v)
		case "env":
			spec.Env, spec.SecretEnv, err = values(v, secret)
		case "headers":
			spec.Headers, spec.SecretHeaders, err = values(v, secret)
		case "timeout_s":
			f, ok := number(v)
			switch {
			case !ok:
				err = fmt.Errorf("got %s, want a number of seconds", jsonvalue.TypeName(v))
			case !(f > 0 && f <= 1e9):
				err = fmt.Errorf("must be > 0 and at most 1e9 seconds, got %v", f)
			}
			spec.Timeout = time.Duration(f * float64(time.Second))
		default:
			hint := ""
			if c := didyoumean.Closest(k, settingKeys); c != "" {
				hint = fmt.Sprintf(" (did you mean '%s'?)", c)
			}
			return Spec{}, fmt.Errorf("mcp server '%s': unknown key '%s'%s; the keys are %s", name, k, hint, strings.Join(settingKeys, ", "))
		}
		if err != nil {
			return Spec{}, fmt.Errorf("mcp server '%s': '%s': %v", name, k, err)
		}
	}
	if err := spec.check(); err != nil {
		return Spec{}, fmt.Errorf("mcp server '%s': %v", name, err)
	}
	return spec, nil
}

func str(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("got %s, want a string", jsonvalue.TypeName(v))
	}
	return s, nil
}

func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("got %s, want a list of strings", jsonvalue.TypeName(v))
	}
	out := make([]string, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("[%d]: got %s, want a string", i, jsonvalue.TypeName(x))
		}
		out[i] = s
	}
	return out, nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case int:
		return float64(n), true
	}
	return 0, false
}

// values reads {NAME: string or {secret: VAR}}.
func values(v any, secret func(string) (workspace.Secret, error)) (map[string]string, map[string]workspace.Secret, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("got %s, want a map of names to strings or {secret: VAR}", jsonvalue.TypeName(v))
	}
	plain, secrets := map[string]string{}, map[string]workspace.Secret{}
	for _, k := range sortedKeys(m) {
		switch x := m[k].(type) {
		case string:
			plain[k] = x
		case map[string]any:
			name, ok := x["secret"].(string)
			if !ok || len(x) != 1 {
				return nil, nil, fmt.Errorf("'%s': want a string or {secret: VAR}", k)
			}
			if secret == nil {
				return nil, nil, fmt.Errorf("'%s': secrets cannot be looked up here", k)
			}
			s, err := secret(name)
			if err != nil {
				return nil, nil, fmt.Errorf("'%s': %v", k, err)
			}
			secrets[k] = s
		default:
			return nil, nil, fmt.Errorf("'%s': got %s, want a string or {secret: VAR}", k, jsonvalue.TypeName(m[k]))
		}
	}
	return plain, secrets, nil
}
