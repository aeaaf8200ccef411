package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type namedProvider string

func (p namedProvider) Name() string { return string(p) }
func (p namedProvider) Complete(context.Context, *Request) (*Response, error) {
	return &Response{Text: string(p)}, nil
}

// TestChain resolves a primary and a fallback, wrapping each: the first
// entry gets the default model, the mock is never built, and a provider
// that cannot be built reaches the wrapper with its error.
func TestChain(t *testing.T) {
	s := &Settings{Model: "default-model", Getenv: func(string) string { return "" }}
	type seen struct {
		name   string
		real   bool
		failed bool
	}
	var got []seen
	wrap := func(name string, real Provider, err error) Provider {
		got = append(got, seen{name, real != nil, err != nil})
		return namedProvider(name)
	}
	chain, err := s.Chain([]TargetSpec{{Provider: "mock"}, {Provider: "openai", Model: "gpt-x"}}, wrap)
	if err != nil {
		t.Fatal(err)
	}
	if len(chain) != 2 || chain[0].Model != "default-model" || chain[1].Model != "gpt-x" {
		t.Fatalf("chain = %+v", chain)
	}
	if want := []seen{{"mock", false, false}, {"openai", false, true}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("wrapped %+v, want %+v", got, want)
	}
	// without a wrapper, a provider that cannot be built is an error
	if _, err := s.Chain([]TargetSpec{{Provider: "openai"}}, nil); err == nil {
		t.Fatal("openai without a key or a factory built")
	}
	if _, err := (&Settings{}).Chain([]TargetSpec{{}}, wrap); !errors.Is(err, ErrNoProvider) && (err == nil || !strings.Contains(err.Error(), "no provider configured")) {
		t.Fatalf("unresolvable: %v", err)
	}
}

func TestRetrying(t *testing.T) {
	r := &Retrying{Chain: []Target{{Provider: namedProvider("a")}}, Policy: DefaultRetry()}
	resp, err := r.Complete(context.Background(), &Request{})
	if err != nil || resp.Text != "a" || r.Name() != "a" {
		t.Fatalf("Complete = %v, %v; Name %s", resp, err, r.Name())
	}
}

// providerFunc is a provider named "func" answering with f.
type providerFunc func(ctx context.Context, req *Request) (*Response, error)

func (f providerFunc) Name() string { return "func" }
func (f providerFunc) Complete(ctx context.Context, req *Request) (*Response, error) {
	return f(ctx, req)
}

func TestFallbackTransientOnly(t *testing.T) {
	fail := func(cat Category) Provider {
		return providerFunc(func(ctx context.Context, req *Request) (*Response, error) {
			return nil, &Error{Provider: "p", Category: cat, Message: "x"}
		})
	}
	ok := providerFunc(func(ctx context.Context, req *Request) (*Response, error) { return &Response{Text: "ok"}, nil })
	var moves []string
	policy := RetryPolicy{FallbackTransientOnly: true, OnFallback: func(from, to string, reason Category) {
		moves = append(moves, from+" -> "+to+" ("+string(reason)+")")
	}}
	resp, err := Fallback(context.Background(), []Target{{Provider: fail(ServerError), Model: "a"}, {Provider: ok, Model: "b"}}, policy, &Request{})
	if err != nil || resp.Text != "ok" || len(moves) != 1 || moves[0] != "func/a -> func/b (server_error)" {
		t.Errorf("server error: %v %v %v", resp, err, moves)
	}
	moves = nil
	_, err = Fallback(context.Background(), []Target{{Provider: fail(Auth), Model: "a"}, {Provider: ok, Model: "b"}}, policy, &Request{})
	if e, isErr := AsError(err); !isErr || e.Category != Auth || len(moves) != 0 {
		t.Errorf("auth: %v %v", err, moves)
	}
}
