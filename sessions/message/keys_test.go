package message

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Keys, which imports check against (CheckKeys) and message
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
	if !slices.Equal(tags, Keys) {
		t.Errorf("the JSON form's keys are %v, Keys %v", tags, Keys)
	}
	if !slices.IsSorted(Keys) {
		t.Errorf("Keys is not sorted: %v", Keys)
	}
	for _, k := range Keys {
		if err := CheckKeys(map[string]any{k: nil}); err != nil {
			t.Errorf("key %s: %v", k, err)
		}
	}
	err := CheckKeys(map[string]any{"role": "user", "text": "x", "bogus": 1})
	if err == nil || err.Error() != "unknown message key 'bogus' (expected one of: "+strings.Join(Keys, ", ")+")" {
		t.Errorf("an unknown key: %v", err)
	}
}
