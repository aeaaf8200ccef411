package mcp

import (
	"net/http"
	"net/url"

	"github.com/skein-dev/skein/workspace"
)

// headerClient returns the HTTP client of an url server: the policy's
// (allowlisted hosts only, every address checked when dialling, no
// proxy), adding spec's headers to requests for the endpoint's origin.
func headerClient(policy *workspace.Policy, spec *Spec) *http.Client {
	c := policy.HTTPClient()
	if len(spec.Headers) == 0 && len(spec.SecretHeaders) == 0 {
		return c
	}
	origin, _ := url.Parse(spec.URL)
	c.Transport = &headers{next: c.Transport, origin: origin, plain: spec.Headers, secret: spec.SecretHeaders}
	return c
}

// headers adds the server's headers to each request to its origin.
type headers struct {
	next   http.RoundTripper
	origin *url.URL
	plain  map[string]string
	secret map[string]workspace.Secret
}

func (h *headers) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL
	if u.Scheme != h.origin.Scheme || u.Host != h.origin.Host {
		return h.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range h.plain {
		req.Header.Set(k, v)
	}
	for k, v := range h.secret {
		req.Header.Set(k, v.Reveal())
	}
	return h.next.RoundTrip(req)
}
