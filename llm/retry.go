package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// MaxRetryDelay caps every wait between retries, including a provider's
// retry-after.
const MaxRetryDelay = 60 * time.Second

// Defaults of the retry policy of a model call (llm_retries,
// llm_backoff_ms).
const (
	DefaultRetries = 2
	DefaultBackoff = 500 * time.Millisecond
)

// DefaultRetry returns the policy of DefaultRetries retries starting at
// DefaultBackoff.
func DefaultRetry() RetryPolicy { return RetryPolicy{Retries: DefaultRetries, Backoff: DefaultBackoff} }

// RetryPolicy retries a call that failed with a transient error.
type RetryPolicy struct {
	// Retries is the number of retries after the first attempt.
	Retries int
	// Backoff is the first wait; it doubles after each retry. A provider's
	// retry-after, when given, replaces it. Every wait is capped at
	// MaxRetryDelay and jittered (see Delay).
	Backoff time.Duration
	// Jitter returns a number in [0, 1] that spreads the waits (default:
	// math/rand/v2); 0 means no jitter, which tests use.
	Jitter func() float64
	// Sleep waits for d or until ctx is done (default: a timer). Tests
	// replace it to run instantly.
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry, if set, is told about each retry before its wait.
	OnRetry func(attempt int, err *Error, wait time.Duration)
	// OnFallback, if set, is told when Fallback moves on to the next
	// target: from and to as "provider/model", reason the category of the
	// error that ended the previous one ("" when it was not an *Error).
	OnFallback func(from, to string, reason Category)
	// FallbackTransientOnly makes Fallback move on only after a transient
	// error (rate_limit, overloaded, server_error, timeout, network): an
	// auth, invalid_request or context_length error ends the call. An
	// agent's fallback_chain works this way.
	FallbackTransientOnly bool
}

// Delay returns the wait before retry number attempt (1-based) after err.
// Waits are jittered so that callers failing together (parallel tests
// hitting one rate limit) do not retry in lockstep: the doubling backoff
// d becomes a wait between d/2 and d ("equal jitter"), and a provider's
// retry-after r, a wait between r and r + r/10 (never sooner than asked).
func (p RetryPolicy) Delay(attempt int, err *Error) time.Duration {
	jitter := p.Jitter
	if jitter == nil {
		jitter = rand.Float64
	}
	if err != nil && err.RetryAfter > 0 {
		r := min(err.RetryAfter, MaxRetryDelay)
		return min(r+time.Duration(float64(r/10)*jitter()), MaxRetryDelay)
	}
	d := p.Backoff << (attempt - 1)
	if d <= 0 || d > MaxRetryDelay {
		d = MaxRetryDelay
	}
	return d - time.Duration(float64(d/2)*jitter())
}

// SleepContext waits for d or until ctx is done, returning ctx's error then.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Call runs call, retrying it under the policy while it fails with a
// retryable *Error and ctx is live.
func (p RetryPolicy) Call(ctx context.Context, call func() (*Response, error)) (*Response, error) {
	sleep := p.Sleep
	if sleep == nil {
		sleep = SleepContext
	}
	for attempt := 0; ; attempt++ {
		resp, err := call()
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e, ok := AsError(err)
		if !ok || !e.Retryable() || attempt >= p.Retries {
			return nil, err
		}
		wait := p.Delay(attempt+1, e)
		if p.OnRetry != nil {
			p.OnRetry(attempt+1, e, wait)
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// Target is one entry of a fallback chain: a provider and the model to ask
// it for ("" keeps the request's model).
type Target struct {
	Provider Provider
	Model    string
}

// Fallback tries each target in order, each under the retry policy, until
// one answers. A context_length error is returned at once (the caller can
// compact and retry; another provider would fail the same way), as is
// cancellation. When every target fails, the error names each attempt and
// wraps the last one.
func Fallback(ctx context.Context, chain []Target, policy RetryPolicy, req *Request) (*Response, error) {
	if len(chain) == 0 {
		return nil, errors.New("no provider to call")
	}
	var failures []string
	var last error
	var from string
	for i, t := range chain {
		r := *req
		if t.Model != "" {
			r.Model = t.Model
		}
		if i > 0 && policy.OnFallback != nil {
			e, _ := AsError(last)
			var reason Category
			if e != nil {
				reason = e.Category
			}
			policy.OnFallback(from, t.Provider.Name()+"/"+r.Model, reason)
		}
		from = t.Provider.Name() + "/" + r.Model
		resp, err := policy.Call(ctx, func() (*Response, error) { return t.Provider.Complete(ctx, &r) })
		if err == nil {
			if resp.Provider == "" {
				resp.Provider = t.Provider.Name()
			}
			if resp.Model == "" {
				resp.Model = r.Model
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e, ok := AsError(err)
		if ok && e.Category == ContextLength {
			return nil, err
		}
		if policy.FallbackTransientOnly && (!ok || !e.Category.Transient()) {
			// an error the next model would not fix: no fallback
			if len(failures) == 0 {
				return nil, err
			}
			return nil, &ChainError{Attempts: append(failures, err.Error()), Last: err}
		}
		last = err
		failures = append(failures, err.Error())
	}
	if len(failures) == 1 {
		return nil, last
	}
	return nil, &ChainError{Attempts: failures, Last: last}
}

// ChainError reports that every provider of a fallback chain failed.
type ChainError struct {
	Attempts []string
	Last     error
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("every provider failed: %s", strings.Join(e.Attempts, "; then "))
}

// Unwrap returns the last attempt's error.
func (e *ChainError) Unwrap() error { return e.Last }
