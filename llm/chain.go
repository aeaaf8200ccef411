package llm

import (
	"context"
	"fmt"
)

// TargetSpec names one entry of a fallback chain as a script writes it:
// a provider name (or "" to resolve it from the model and the defaults),
// a model ("" for the default), a base URL ("" for the provider's) and
// an Azure OpenAI api-version ("" for AzureAPIVersionEnv, else the
// client's default).
type TargetSpec struct {
	Provider, Model, BaseURL, APIVersion string
}

// Wrapper wraps each provider of a chain: it gets the resolved name and
// the real provider with the error building it (nil, nil for the mock).
// A VM's mock queue is one: queued responses answer calls of any
// provider, so a real provider that cannot be built (no API key) only
// fails when a call actually reaches it.
type Wrapper func(name string, real Provider, buildErr error) Provider

// Chain resolves specs into a fallback chain. The first spec's empty
// model is the default model. A name that cannot be resolved, and an
// api-version given to a provider that is not Azure OpenAI, are errors
// (the latter prefixed "fallback[i]: " for the specs after the first); a
// provider that cannot be built is passed to wrap with its error (or,
// without wrap, is an error).
func (s *Settings) Chain(specs []TargetSpec, wrap Wrapper) ([]Target, error) {
	out := make([]Target, 0, len(specs))
	for i, t := range specs {
		if i == 0 && t.Model == "" {
			t.Model = s.Model
		}
		name, err := s.ResolveName(t.Provider, t.Model)
		if err != nil {
			return nil, err
		}
		if err := CheckAPIVersion(name, t.APIVersion); err != nil {
			if i > 0 {
				err = fmt.Errorf("fallback[%d]: %w", i-1, err)
			}
			return nil, err
		}
		var p Provider
		var buildErr error
		if name != ProviderMock {
			p, buildErr = s.Build(name, t.BaseURL, t.APIVersion)
		}
		switch {
		case wrap != nil:
			p = wrap(name, p, buildErr)
		case buildErr != nil:
			return nil, buildErr
		}
		out = append(out, Target{Provider: p, Model: t.Model})
	}
	return out, nil
}

// Retrying is a provider that calls a fallback chain under a retry
// policy: a single model call (a compaction's summary) gets the
// resilience of an agent loop's calls.
type Retrying struct {
	Chain  []Target
	Policy RetryPolicy
}

// Name is the first provider's name.
func (r *Retrying) Name() string { return r.Chain[0].Provider.Name() }

// Complete calls the chain with Fallback.
func (r *Retrying) Complete(ctx context.Context, req *Request) (*Response, error) {
	return Fallback(ctx, r.Chain, r.Policy, req)
}
