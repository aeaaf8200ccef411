package workspace

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

const secretValueForTest = "sk-live-0123456789"

func TestSecretNeverPrinted(t *testing.T) {
	s := NewSecret("OPENAI_API_KEY", secretValueForTest)
	type exported struct{ Key Secret }
	type unexported struct{ key Secret }
	values := map[string]any{
		"value":            s,
		"pointer":          &s,
		"slice":            []Secret{s},
		"map":              map[string]Secret{"k": s},
		"map key":          map[Secret]int{s: 1},
		"exported field":   exported{s},
		"unexported field": unexported{s},
		"pointer to struct with unexported field": &unexported{s},
		"interface slice":                         []any{s, &s},
	}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T", "%10v", "%-30s|", "%#q", "%p"}
	for name, v := range values {
		for _, verb := range verbs {
			out := fmt.Sprintf(verb, v)
			if strings.Contains(out, secretValueForTest) || strings.Contains(out, fmt.Sprintf("%x", secretValueForTest)) {
				t.Errorf("%s with %s leaks: %s", name, verb, out)
			}
		}
		for _, out := range []string{fmt.Sprint(v), fmt.Sprintln(v)} {
			if strings.Contains(out, secretValueForTest) {
				t.Errorf("%s with Sprint leaks: %s", name, out)
			}
		}
	}
	for verb, want := range map[string]string{
		"%v": "<secret OPENAI_API_KEY>", "%s": "<secret OPENAI_API_KEY>", "%+v": "<secret OPENAI_API_KEY>",
		"%#v": "<secret OPENAI_API_KEY>", "%q": `"<secret OPENAI_API_KEY>"`, "%x": "<secret OPENAI_API_KEY>",
		"%25v": "  <secret OPENAI_API_KEY>", "%-25v": "<secret OPENAI_API_KEY>  ",
	} {
		if got := fmt.Sprintf(verb, s); got != want {
			t.Errorf("Sprintf(%q) = %q, want %q", verb, got, want)
		}
	}
	if s.String() != "<secret OPENAI_API_KEY>" || s.GoString() != "<secret OPENAI_API_KEY>" || (Secret{}).String() != "<secret>" {
		t.Errorf("String, GoString = %q, %q", s.String(), s.GoString())
	}
	if fmt.Sprintf("%v", exported{s}) != "{<secret OPENAI_API_KEY>}" {
		t.Errorf("exported field: %v", exported{s})
	}
}

func TestSecretEncoders(t *testing.T) {
	s := NewSecret("TOKEN", secretValueForTest)
	type payload struct {
		Key  Secret            `json:"key" xml:"key"`
		Ptr  *Secret           `json:"ptr"`
		Map  map[string]Secret `json:"map" xml:"-"`
		Keys map[Secret]int    `json:"keys" xml:"-"`
		hide Secret
	}
	v := payload{Key: s, Ptr: &s, Map: map[string]Secret{"a": s}, Keys: map[Secret]int{s: 1}, hide: s}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]any
	if err := json.Unmarshal(data, &decoded); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"key":  "<secret TOKEN>",
		"ptr":  "<secret TOKEN>",
		"map":  map[string]any{"a": "<secret TOKEN>"},
		"keys": map[string]any{"<secret TOKEN>": 1.0},
	}
	if !reflect.DeepEqual(decoded, want) {
		t.Errorf("json = %s, want %v", data, want)
	}
	var str string
	if data, _ := json.Marshal(s); json.Unmarshal(data, &str) != nil || str != "<secret TOKEN>" {
		t.Errorf("json of a secret = %s", data)
	}
	if data, err := xml.Marshal(v); err != nil || strings.Contains(string(data), secretValueForTest) {
		t.Errorf("xml = %s, %v", data, err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("call", "key", s)
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("call", "key", s, "p", v)
	if out := buf.String(); strings.Contains(out, secretValueForTest) || !strings.Contains(out, "<secret TOKEN>") {
		t.Errorf("slog: %s", out)
	}
	var back Secret
	if err := json.Unmarshal([]byte(`"x"`), &back); err == nil {
		t.Error("a secret was decoded from JSON")
	}
	if wrapped := fmt.Errorf("call failed with %v", s); strings.Contains(wrapped.Error(), secretValueForTest) {
		t.Errorf("error text leaks: %v", wrapped)
	}
}

func TestLookupSecret(t *testing.T) {
	env := map[string]string{"SET": "v", "EMPTY": ""}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	s, err := LookupSecret("SET", getenv)
	if err != nil || s.Name() != "SET" || s.Reveal() != "v" || s.IsZero() {
		t.Errorf("LookupSecret(SET) = %v (%q), %v", s, s.Reveal(), err)
	}
	for name, want := range map[string]string{
		"UNSET": `environment variable "UNSET" is not set`,
		"EMPTY": `environment variable "EMPTY" is empty`,
		"":      `invalid environment variable name ""`,
		"A=B":   `invalid environment variable name "A=B"`,
		"1A":    `invalid environment variable name "1A"`,
	} {
		if _, err := LookupSecret(name, getenv); err == nil || err.Error() != want {
			t.Errorf("LookupSecret(%q) = %v, want %q", name, err, want)
		}
	}
	t.Setenv("SKEIN_TEST_SECRET", "from-env")
	if s, err := LookupSecret("SKEIN_TEST_SECRET", nil); err != nil || s.Reveal() != "from-env" {
		t.Errorf("LookupSecret from os: %q, %v", s.Reveal(), err)
	}
	if !(Secret{}).IsZero() || (Secret{}).Reveal() != "" {
		t.Error("zero Secret")
	}
	if errors.Is(err, ErrNotAllowed) {
		t.Error("a missing variable is not a refusal")
	}
}
