package llm

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
)

// pricesJSON is the built-in price table.
//
//go:embed prices.json
var pricesJSON []byte

// Price is what a model charges, in US dollars per million tokens.
// CacheRead and CacheWrite of 0 mean the input price.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read,omitempty"`
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// Cost returns what a call with usage u costs: the uncached input at the
// input price, cache reads and writes at theirs, and every output token
// (reasoning included) at the output price.
func (p Price) Cost(u Usage) float64 {
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	plain := max(u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, 0)
	return (float64(plain)*p.Input + float64(u.CacheReadTokens)*read + float64(u.CacheWriteTokens)*write + float64(u.OutputTokens)*p.Output) / 1e6
}

// Prices is a price table: the built-in one (DefaultPrices), possibly with
// the entries of a --prices file over it.
type Prices struct {
	// Date is the day the prices were taken from the providers' lists.
	Date   string           `json:"date"`
	Note   string           `json:"note,omitempty"`
	Models map[string]Price `json:"models"`

	// lazy marks DefaultPrices' table: its fields are filled from the
	// built-in table on first use (see table), not when a run starts.
	lazy bool
	once sync.Once
}

// DefaultPrices returns the built-in price table. It is parsed on its
// first use (Lookup, Names, TableDate): a run that prices no call does
// not pay for it.
func DefaultPrices() *Prices {
	return &Prices{lazy: true}
}

// builtinPrices parses the built-in price table.
func builtinPrices() *Prices {
	p, err := ParsePrices(pricesJSON)
	if err != nil {
		panic("llm: the built-in price table is broken: " + err.Error())
	}
	return p
}

// table returns p, with a lazy table's fields filled first.
func (p *Prices) table() *Prices {
	if p.lazy {
		p.once.Do(func() {
			b := builtinPrices()
			p.Date, p.Note, p.Models = b.Date, b.Note, b.Models
		})
	}
	return p
}

// TableDate returns the day the table's prices were taken.
func (p *Prices) TableDate() string {
	return p.table().Date
}

// ParsePrices reads a price table: {"date": "YYYY-MM-DD", "models":
// {"<model>": {"input": N, "output": N, "cache_read": N, "cache_write":
// N}}}, prices in dollars per million tokens, none negative.
func ParsePrices(data []byte) (*Prices, error) {
	var p Prices
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("price table: %v", err)
	}
	if len(p.Models) == 0 {
		return nil, fmt.Errorf("price table: no models")
	}
	for name, m := range p.Models {
		for _, v := range []float64{m.Input, m.Output, m.CacheRead, m.CacheWrite} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("price table: model %q: prices must be finite and not negative", name)
			}
		}
	}
	return &p, nil
}

// LoadPrices returns the built-in table with the entries of the file at
// path over it (--prices FILE): a model the file names gets the file's
// price; the table's date becomes the file's, when it has one.
func LoadPrices(path string) (*Prices, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	over, err := ParsePrices(data)
	if err != nil {
		return nil, err
	}
	p := builtinPrices()
	for name, m := range over.Models {
		p.Models[name] = m
	}
	if over.Date != "" {
		p.Date = over.Date
	}
	return p, nil
}

// Lookup returns the price of a model: the entry of its exact name, else
// of the longest entry its name starts with followed by '-' or '@'
// ("gpt-4.1-2025-04-14" is "gpt-4.1", "claude-sonnet-4-5@20250929" is
// "claude-sonnet-4-5"). A "models/" or gateway prefix ("openai/") is
// ignored. ok is false for a model the table does not know: its cost is
// unknown, not zero.
func (p *Prices) Lookup(model string) (price Price, ok bool) {
	if p == nil {
		return Price{}, false
	}
	p = p.table()
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	if m, ok := p.Models[model]; ok {
		return m, true
	}
	best := ""
	for name := range p.Models {
		if len(name) > len(best) && len(model) > len(name) && strings.HasPrefix(model, name) && (model[len(name)] == '-' || model[len(name)] == '@') {
			best = name
		}
	}
	if best == "" {
		return Price{}, false
	}
	return p.Models[best], true
}

// Names returns the models of the table, sorted.
func (p *Prices) Names() []string {
	p = p.table()
	names := make([]string, 0, len(p.Models))
	for n := range p.Models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Budget adds up what calls cost and caps it. One Budget is shared by
// every call it covers (an agent loop's max_cost_usd, or a whole run's
// --max-cost-usd); it is safe for concurrent use.
type Budget struct {
	// MaxUSD is the cap (0: none, the budget only counts).
	MaxUSD float64

	mu      sync.Mutex
	spent   float64
	unknown int // calls whose cost is unknown
}

// Add records the cost of one call; known is false when the model's price
// is unknown.
func (b *Budget) Add(usd float64, known bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if known {
		b.spent += usd
	} else {
		b.unknown++
	}
}

// Spent returns the cost so far, and whether it is known (no call of
// unknown cost was added).
func (b *Budget) Spent() (usd float64, known bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent, b.unknown == 0
}

// Allows reports whether a call expected to cost next can start: whether
// the spending so far plus next stays within the cap.
func (b *Budget) Allows(next float64) bool {
	if b.MaxUSD <= 0 {
		return true
	}
	spent, _ := b.Spent()
	return spent+next <= b.MaxUSD
}
