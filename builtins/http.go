package builtins

// The http module: network egress under the workspace policy.
//
//	http.get(url, headers=None, body=None, timeout_s=30) -> {status, headers, body, url, truncated}
//	http.post(url, headers=None, body=None, timeout_s=30) -> {status, headers, body, url, truncated}
//
// Only http and https URLs of hosts on the network allowlist
// (--allow-net) are reached, never through a proxy; private, loopback and
// link-local addresses only when listed exactly, also after redirects
// (at most 10) and DNS resolution. headers is a dict of strings or
// secrets (a secret header is dropped on a redirect to another origin);
// body is a str or bytes. Any status is a result: headers has lower-case
// names, body is the response (at most 10 MiB, truncated reports a cut)
// and url the final URL after redirects. A refusal, a network error, the
// timeout and cancellation are errors.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/vm"
	"github.com/skein-dev/skein/workspace"
)

func httpSpecs() []Spec {
	const area = "Workspace"
	return []Spec{
		{"http.get", "(url, headers=None, body=None, timeout_s=30) -> dict",
			"GET an allowlisted URL: {status, headers, body, url, truncated}; any status is a result.", area, httpBuiltin(http.MethodGet)},
		{"http.post", "(url, headers=None, body=None, timeout_s=30) -> dict",
			"POST to an allowlisted URL: {status, headers, body, url, truncated}; any status is a result.", area, httpBuiltin(http.MethodPost)},
	}
}

// doHTTP sends r under p, honouring the thread's context. Cancellation is
// an error naming its cause.
func doHTTP(thread *starlark.Thread, p *workspace.Policy, r workspace.HTTPRequest) (*workspace.HTTPResponse, error) {
	ctx := vm.ContextOf(thread)
	res, err := p.Do(ctx, r)
	if err != nil && ctx.Err() != nil {
		target := r.URL
		if u, perr := url.Parse(r.URL); perr == nil {
			target = u.Redacted()
		}
		return nil, fmt.Errorf("%s %s cancelled: %w", r.Method, target, context.Cause(ctx))
	}
	return res, err
}

func httpBuiltin(method string) func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		r := workspace.HTTPRequest{Method: method}
		var headers, body, timeout starlark.Value = starlark.None, starlark.None, starlark.None
		if err := starlark.UnpackArgs(b.Name(), args, kwargs,
			"url", &r.URL, "headers??", &headers, "body??", &body, "timeout_s??", &timeout); err != nil {
			return nil, err
		}
		var err error
		if r.Headers, r.SecretHeaders, err = secretMap(b.Name(), "headers", headers); err != nil {
			return nil, err
		}
		switch x := body.(type) {
		case starlark.NoneType:
		case starlark.String:
			r.Body = string(x)
		case starlark.Bytes:
			r.Body = string(x)
		default:
			return nil, fmt.Errorf("%s: for parameter body: got %s, want string or bytes", b.Name(), body.Type())
		}
		if r.Timeout, err = seconds(b.Name(), "timeout_s", timeout, workspace.DefaultHTTPTimeout); err != nil {
			return nil, err
		}
		p, err := policyOf(thread, b.Name())
		if err != nil {
			return nil, err
		}
		res, err := doHTTP(thread, p, r)
		if err != nil {
			return nil, fail(b.Name(), err)
		}
		d := starlark.NewDict(5)
		redact := redactorOf(thread)
		for k, v := range res.Headers {
			res.Headers[k] = redact.Redact(v)
		}
		res.Body, res.URL = redact.Redact(res.Body), redact.Redact(res.URL)
		_ = d.SetKey(starlark.String("status"), starlark.MakeInt(res.Status))
		_ = d.SetKey(starlark.String("headers"), vm.ToStarlark(res.Headers))
		_ = d.SetKey(starlark.String("body"), starlark.String(res.Body))
		_ = d.SetKey(starlark.String("url"), starlark.String(res.URL))
		_ = d.SetKey(starlark.String("truncated"), starlark.Bool(res.Truncated))
		return d, nil
	}
}
