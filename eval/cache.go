package eval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/skein-dev/skein/llm"
	"github.com/skein-dev/skein/llm/mock"
	"github.com/skein-dev/skein/sessions"
)

// Cache answers a model request that was answered before with the same
// reply, without a provider request: an eval run again without changes
// costs nothing. The key is the request's fingerprint (mock.RequestShape:
// model, system prompt, messages, tools, output schema), the sampling
// options (temperature, max tokens, stop, thinking), the provider's name
// and the job's repeat index (WithJob), so each repeat samples the model
// once and is then answered from the cache.
//
// Entries are kept in the session store as the steps of one run record
// (CacheRunID), so they outlive the process; a store without run records
// keeps them for the process only. A reply from the cache reports no
// token usage: nothing was spent on it.
type Cache struct {
	store *sessions.Store

	mu      sync.Mutex
	entries map[string]*llm.Response
	added   [][]byte // entries not saved yet
	exists  bool     // the run record exists
	durable bool     // the store keeps run records

	hits, misses atomic.Int64
}

// CacheRunID is the run record holding the response cache.
const CacheRunID = "skein-eval-cache"

// cacheEntry is one cached reply.
type cacheEntry struct {
	Key      string          `json:"key"`
	Response json.RawMessage `json:"response"`
}

// OpenCache loads the cache kept in store.
func OpenCache(ctx context.Context, store *sessions.Store) (*Cache, error) {
	c := &Cache{store: store, entries: map[string]*llm.Response{}, durable: true}
	rr, err := store.LoadRun(ctx, CacheRunID)
	switch {
	case errors.Is(err, sessions.ErrNoRuns):
		c.durable = false
		return c, nil
	case errors.Is(err, sessions.ErrRunNotFound):
		return c, nil
	case err != nil:
		return nil, err
	}
	c.exists = true
	for _, step := range rr.Steps {
		var e cacheEntry
		if json.Unmarshal(step, &e) != nil {
			continue // an entry that does not read is a miss
		}
		if resp, err := decodeResponse(e.Response); err == nil {
			c.entries[e.Key] = resp
		}
	}
	return c, nil
}

func decodeResponse(data []byte) (*llm.Response, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var r llm.Response
	if err := d.Decode(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Len returns the number of cached replies.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// Hits and Misses count the requests answered from the cache and those
// sent to a provider since the cache was opened.
func (c *Cache) Hits() int64   { return c.hits.Load() }
func (c *Cache) Misses() int64 { return c.misses.Load() }

// Save stores the replies added since the last Save.
func (c *Cache) Save(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.added) == 0 || !c.durable {
		return nil
	}
	now := c.store.Now()
	var err error
	if c.exists {
		err = c.store.UpdateRun(ctx, CacheRunID, &sessions.RunUpdate{Status: "cache", UpdatedAt: now, Head: []byte(`{"kind":"eval response cache"}`), Steps: c.added})
	} else {
		err = c.store.CreateRun(ctx, &sessions.RunRecord{ID: CacheRunID, Workflow: "eval-cache", Status: "cache",
			CreatedAt: now, UpdatedAt: now, Head: []byte(`{"kind":"eval response cache"}`), Steps: c.added})
	}
	if err != nil {
		return err
	}
	c.exists, c.added = true, nil
	return nil
}

// Wrap returns p with its replies cached.
func (c *Cache) Wrap(p llm.Provider) llm.Provider { return &cached{Provider: p, cache: c} }

type cached struct {
	llm.Provider
	cache *Cache
}

func (p *cached) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	key, ok := cacheKey(p.Name(), req, repeatOf(ctx))
	c := p.cache
	if ok {
		c.mu.Lock()
		hit := c.entries[key]
		c.mu.Unlock()
		if hit != nil {
			c.hits.Add(1)
			if j := jobOf(ctx); j != nil {
				j.cached.Add(1)
			}
			resp := *hit
			resp.Usage = llm.Usage{}
			if req.Stream && req.OnDelta != nil && resp.Text != "" {
				req.OnDelta(llm.Delta{Text: resp.Text})
			}
			return &resp, nil
		}
	}
	c.misses.Add(1)
	resp, err := p.Provider.Complete(ctx, req)
	if err != nil || !ok {
		return resp, err
	}
	data, merr := json.Marshal(resp)
	if merr != nil {
		return resp, nil // not cacheable: answered all the same
	}
	entry, _ := json.Marshal(cacheEntry{Key: key, Response: data})
	stored, derr := decodeResponse(data)
	if derr != nil {
		return resp, nil
	}
	c.mu.Lock()
	c.entries[key] = stored
	c.added = append(c.added, entry)
	c.mu.Unlock()
	return resp, nil
}

// cacheKey is the key of req sent to provider in repeat; false when the
// request cannot be keyed (it is then not cached).
func cacheKey(provider string, req *llm.Request, repeat int) (string, bool) {
	shape := mock.RequestShape(req)
	fields := map[string]any{
		"provider": provider, "fingerprint": mock.Fingerprint(shape), "repeat": repeat,
		"temperature": req.Temperature, "max_tokens": req.MaxTokens, "stop": req.Stop, "thinking": req.Thinking,
	}
	data, err := json.Marshal(fields)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), true
}

// jobState is what a job's context carries: its repeat index and the
// requests the cache answered for it.
type jobState struct {
	repeat int
	cached atomic.Int64
}

type jobKey struct{}

// WithJob returns ctx carrying the job's repeat index (part of the cache
// key) and a count of the requests the cache answers for it (JobCached).
func WithJob(ctx context.Context, repeat int) context.Context {
	return context.WithValue(ctx, jobKey{}, &jobState{repeat: repeat})
}

// JobCached returns the requests the cache answered for the job of ctx.
func JobCached(ctx context.Context) int {
	if j := jobOf(ctx); j != nil {
		return int(j.cached.Load())
	}
	return 0
}

func jobOf(ctx context.Context) *jobState {
	j, _ := ctx.Value(jobKey{}).(*jobState)
	return j
}

func repeatOf(ctx context.Context) int {
	if j := jobOf(ctx); j != nil {
		return j.repeat
	}
	return 0
}
