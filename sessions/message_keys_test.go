package sessions

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// MessageKeys, which imports check against (CheckMessageKeys) and message
// dicts are checked against, are the keys of the JSON form MarshalJSON
// writes: a field added to one is added to the other.
func TestMessageKeysAreTheJSONKeys(t *testing.T) {
	var tags []string
	typ := reflect.TypeFor[messageJSON]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		tags = append(tags, name)
	}
	slices.Sort(tags)
	if !slices.Equal(tags, MessageKeys) {
		t.Errorf("the JSON form's keys are %v, MessageKeys %v", tags, MessageKeys)
	}
	if !slices.IsSorted(MessageKeys) {
		t.Errorf("MessageKeys is not sorted: %v", MessageKeys)
	}
	for _, k := range MessageKeys {
		if err := CheckMessageKeys(map[string]any{k: nil}); err != nil {
			t.Errorf("key %s: %v", k, err)
		}
	}
	err := CheckMessageKeys(map[string]any{"role": "user", "text": "x", "bogus": 1})
	if err == nil || err.Error() != "unknown message key 'bogus' (expected one of: "+strings.Join(MessageKeys, ", ")+")" {
		t.Errorf("an unknown key: %v", err)
	}
}
