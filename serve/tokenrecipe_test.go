package serve

import (
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestTokenRecipeIsURLSafe: the token recipe docs/serve.md gives makes
// tokens that go into a viewer link's ?token= unchanged (base64's '+',
// '/' and '=' do not).
func TestTokenRecipeIsURLSafe(t *testing.T) {
	doc, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^export SKEIN_SERVE_TOKEN=(\$\(.*\))`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/serve.md has no export SKEIN_SERVE_TOKEN=$(...) line")
	}
	for range 20 {
		out, err := exec.Command("sh", "-c", "printf %s "+string(m[1])).Output()
		if err != nil {
			t.Fatalf("%s: %v", m[1], err)
		}
		tok := string(out)
		if len(tok) < 32 || url.QueryEscape(tok) != tok || strings.ContainsAny(tok, " \n") {
			t.Fatalf("the recipe %s made %q: not a URL-safe token of 32 characters or more", m[1], tok)
		}
	}
}
