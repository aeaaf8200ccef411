package mcp_test

import "encoding/json"

func decodeObject(s string) (map[string]any, error) {
	var m map[string]any
	err := json.Unmarshal([]byte(s), &m)
	return m, err
}
