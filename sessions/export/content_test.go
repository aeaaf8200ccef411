package export

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportRefusesInvalidContent imports the files of testdata/malicious
// whose messages no provider takes (the message validator of
// agent_session_inject, message.CheckShape, applies to imports too) and
// expects each refusal to name the problem.
func TestImportRefusesInvalidContent(t *testing.T) {
	for file, want := range map[string]string{
		"empty-user-content.json": "message 0: a user message needs content",
		"no-user-content.json":    "message 0: a user message needs content",
		"image-bad-base64.json":   "message 0: content block 0: an image block's 'data' is not base64",
		"image-not-an-image.json": `message 0: content block 0: an image block's 'media_type' must be an image type such as image/png, not "text/html"`,
		"thinking-on-user.json":   "message 0: content block 0: a thinking block is only allowed on assistant messages, not user",
		"junk-usage.json":         `message 1: unknown 'usage' key 'evil'`,
		"empty-tool-calls.jsonl":  "message 1: 'tool_calls' is an empty list",
	} {
		f, err := os.Open(filepath.Join("testdata/malicious", file))
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = ReadExport(f)
		f.Close()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", file, err, want)
		}
	}
}
