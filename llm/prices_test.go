package llm

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPriceLookup(t *testing.T) {
	p := DefaultPrices()
	if p.TableDate() == "" {
		t.Fatal("the built-in table has no date")
	}
	tests := []struct {
		model string
		want  string // the entry it must get, "" for none
	}{
		{"gpt-4.1", "gpt-4.1"},
		{"gpt-4.1-2025-04-14", "gpt-4.1"},
		{"gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"},
		{"o3-pro-2025-06-10", "o3-pro"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"claude-sonnet-4-20250514", "claude-sonnet-4"},
		{"models/gemini-2.5-flash", "gemini-2.5-flash"},
		{"gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"},
		{"openai/gpt-4o-mini", "gpt-4o-mini"},
		{"gpt-4.10", ""},
		{"llama3.2", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, ok := p.Lookup(tt.model)
		if tt.want == "" {
			if ok {
				t.Errorf("Lookup(%q) = %+v, want unknown", tt.model, got)
			}
			continue
		}
		if !ok || got != p.Models[tt.want] {
			t.Errorf("Lookup(%q) = %+v, %v; want %s's %+v", tt.model, got, ok, tt.want, p.Models[tt.want])
		}
	}
	var none *Prices
	if _, ok := none.Lookup("gpt-4.1"); ok {
		t.Error("a nil table knows a price")
	}
}

// TestDefaultPricesLazy checks that the built-in table is parsed on its
// first use, not when a run builds its settings.
func TestDefaultPricesLazy(t *testing.T) {
	if n := testing.AllocsPerRun(10, func() { _ = DefaultPrices() }); n > 1 {
		t.Errorf("DefaultPrices makes %v allocations, want 1 (the table is parsed on first use)", n)
	}
	p := DefaultPrices()
	if _, ok := p.Lookup("gpt-4.1"); !ok || len(p.Names()) == 0 || p.TableDate() == "" {
		t.Errorf("a lazy table does not answer: %d names, date %q", len(p.Names()), p.TableDate())
	}
}

func TestPriceCost(t *testing.T) {
	p := Price{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	u := Usage{InputTokens: 1_000_000 + 2_000_000 + 400_000, CacheReadTokens: 2_000_000, CacheWriteTokens: 400_000, OutputTokens: 100_000}
	if got, want := p.Cost(u), 3+0.6+1.5+1.5; math.Abs(got-want) > 1e-9 {
		t.Errorf("cost %v, want %v", got, want)
	}
	// no cache prices: cached tokens cost the input price
	if got := (Price{Input: 2, Output: 8}).Cost(Usage{InputTokens: 1_000_000, CacheReadTokens: 500_000}); math.Abs(got-2) > 1e-9 {
		t.Errorf("cost %v, want 2", got)
	}
}

func TestParsePrices(t *testing.T) {
	for _, tt := range []struct{ in, err string }{
		{`{"date":"d","models":{"m":{"input":1,"output":2}}}`, ""},
		{`{"date":"d","models":{}}`, "price table: no models"},
		{`{"date":"d","models":{"m":{"input":-1,"output":2}}}`, `price table: model "m": prices must be finite and not negative`},
		{`{"date":"d","models":{"m":{"input":1,"outptu":2}}}`, `unknown field "outptu"`},
		{`[`, "price table:"},
	} {
		_, err := ParsePrices([]byte(tt.in))
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParsePrices(%s): %v, want %q", tt.in, err, tt.err)
		}
	}
	path := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(path, []byte(`{"date":"2030-01-01","models":{"gpt-4.1":{"input":1,"output":1},"mine":{"input":5,"output":5}}}`), 0o644)
	p, err := LoadPrices(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Date != "2030-01-01" || p.Models["gpt-4.1"].Input != 1 || p.Models["mine"].Input != 5 || p.Models["gpt-4o"].Input != 2.5 {
		t.Errorf("merged table %+v", p)
	}
}

func TestBudget(t *testing.T) {
	b := &Budget{MaxUSD: 1}
	if !b.Allows(1) || b.Allows(1.01) {
		t.Error("Allows before spending")
	}
	b.Add(0.75, true)
	if !b.Allows(0.25) || b.Allows(0.3) {
		t.Error("Allows after spending")
	}
	if usd, known := b.Spent(); usd != 0.75 || !known {
		t.Errorf("spent %v %v", usd, known)
	}
	b.Add(0, false)
	if _, known := b.Spent(); known {
		t.Error("a call of unknown cost leaves the total known")
	}
	if !(&Budget{}).Allows(1e9) {
		t.Error("an uncapped budget refuses")
	}
}
