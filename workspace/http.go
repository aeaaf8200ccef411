package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Defaults and limits of Do.
const (
	DefaultHTTPTimeout = 30 * time.Second
	DefaultMaxBody     = 10 << 20 // bytes
	MaxRedirects       = 10
)

// HTTPRequest is a request for Do.
type HTTPRequest struct {
	// Method is the HTTP method; "" means GET.
	Method string
	// URL is an absolute http or https URL.
	URL string
	// Headers are the request headers.
	Headers map[string]string
	// SecretHeaders are headers whose values are secrets, revealed only
	// on the wire. They override Headers, and are dropped when a
	// redirect leads to another origin (scheme, host or port).
	SecretHeaders map[string]Secret
	// Body is the request body, "" for none.
	Body string
	// Timeout bounds the whole exchange, redirects and body included
	// (DefaultHTTPTimeout if 0 or negative).
	Timeout time.Duration
	// MaxBody caps the response body kept (DefaultMaxBody if 0 or
	// negative); the rest is not read.
	MaxBody int
}

// HTTPResponse is the response Do returns for any status.
type HTTPResponse struct {
	Status int
	// Headers has lower-case names; repeated headers are joined with ", ".
	Headers map[string]string
	Body    string
	// Truncated reports that the body was longer than MaxBody.
	Truncated bool
	// URL is the URL of the final response, after redirects.
	URL string
}

// HTTPClient returns an http.Client that enforces the network policy on
// every request, redirect (at most MaxRedirects) and connection: only
// http and https, only allowlisted hosts, no proxy, and a non-public
// address only for a host or address listed explicitly, checked for each
// address the host resolves to when dialling. It has no timeout: use the
// request's context.
func (p *Policy) HTTPClient() *http.Client {
	return &http.Client{Transport: p.roundTripper(), CheckRedirect: p.checkRedirect(nil)}
}

// roundTripper returns p's transport, or for a Policy New did not build
// one that refuses everything (never http.DefaultTransport).
func (p *Policy) roundTripper() http.RoundTripper {
	if p.transport == nil {
		return &guardedTransport{p: p}
	}
	return p.transport
}

// Do sends r under the network policy (see HTTPClient) and returns the
// response, whatever its status. A refusal matches ErrNotAllowed, for the
// first request as for a redirect; a timeout or ctx being done is an
// error.
func (p *Policy) Do(ctx context.Context, r HTTPRequest) (*HTTPResponse, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	u, err := parseURL(r.URL)
	if err != nil {
		return nil, err
	}
	if err := p.checkURL(u); err != nil {
		return nil, err
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultHTTPTimeout
	}
	maxBody := r.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMaxBody
	}
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(reqCtx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	secretNames := make([]string, 0, len(r.SecretHeaders))
	for k, s := range r.SecretHeaders {
		req.Header.Set(k, s.Reveal())
		secretNames = append(secretNames, k)
	}
	client := &http.Client{Transport: p.transport, CheckRedirect: p.checkRedirect(secretNames)}
	fail := func(err error) error {
		var ref *refusal
		switch {
		case errors.As(err, &ref):
			return ref
		case ctx.Err() != nil:
			return fmt.Errorf("%s %s: cancelled: %w", method, u.Redacted(), ctx.Err())
		case reqCtx.Err() != nil:
			return fmt.Errorf("%s %s: timed out after %v", method, u.Redacted(), timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%s %s: %w", method, u.Redacted(), err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fail(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(maxBody)+1))
	if err != nil {
		return nil, fail(err)
	}
	out := &HTTPResponse{
		Status:  resp.StatusCode,
		Headers: make(map[string]string, len(resp.Header)),
		URL:     resp.Request.URL.Redacted(),
	}
	if len(data) > maxBody {
		data = data[:maxBody]
		out.Truncated = true
	}
	out.Body = string(data)
	for k, vs := range resp.Header {
		out.Headers[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	return out, nil
}

// CheckURL checks an absolute http or https URL's scheme and host against
// the network policy, before anything connects to it (the addresses the
// host resolves to are checked when dialling, by HTTPClient). A refusal
// matches ErrNotAllowed.
func (p *Policy) CheckURL(rawURL string) error {
	if err := p.check(); err != nil {
		return err
	}
	u, err := parseURL(rawURL)
	if err != nil {
		return err
	}
	return p.checkURL(u)
}

// parseURL parses an absolute URL.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid url %q: %v", raw, errors.Unwrap(err))
	}
	if !u.IsAbs() {
		return nil, fmt.Errorf("invalid url %q: not absolute", raw)
	}
	return u, nil
}

// checkURL checks a request URL's scheme and host against the policy.
func (p *Policy) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return refusef("net "+u.Scheme+":", "http and https only", "url scheme %q is not allowed (only http and https)", u.Scheme)
	}
	host := normHost(u.Hostname())
	if host == "" {
		return fmt.Errorf("url %q has no host", u.Redacted())
	}
	if ok, _ := p.hostAllowed(host, effectivePort(u)); !ok {
		return p.refuseHost(u.Host)
	}
	return nil
}

func effectivePort(u *url.URL) string {
	if port := u.Port(); port != "" {
		return port
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// checkRedirect returns a CheckRedirect function that caps redirects,
// applies the policy to each and drops the secret headers named in
// secrets when the origin changes.
func (p *Policy) checkRedirect(secrets []string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= MaxRedirects {
			return fmt.Errorf("stopped after %d redirects", MaxRedirects)
		}
		if err := p.checkURL(req.URL); err != nil {
			return err
		}
		if !sameOrigin(req.URL, via[0].URL) {
			for _, k := range secrets {
				req.Header.Del(k)
			}
		}
		return nil
	}
}

func sameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && normHost(a.Hostname()) == normHost(b.Hostname()) && effectivePort(a) == effectivePort(b)
}

// guardedTransport applies checkURL to every request before sending it,
// whoever built the client.
type guardedTransport struct {
	p  *Policy
	rt http.RoundTripper
}

func (g *guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	err := g.p.checkURL(req.URL)
	if err == nil && g.rt == nil {
		err = g.p.check()
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return g.rt.RoundTrip(req)
}

// newTransport returns p's transport: no proxy (a proxy would hide the
// destination from the address checks), dialling through dialContext.
func (p *Policy) newTransport() http.RoundTripper {
	return &guardedTransport{p: p, rt: &http.Transport{
		Proxy:                 nil,
		DialContext:           p.dialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}

// dialContext connects to addr after checking the host against the
// allowlist and every address it resolves to against the non-public
// ranges. It dials the checked addresses themselves, so a DNS answer
// that changes between check and use (rebinding) cannot slip in a
// private address; addresses refused are skipped, and if none is left
// the first refusal is returned.
func (p *Policy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	host := normHost(h)
	allowed, explicit := p.hostAllowed(host, port)
	if !allowed {
		return nil, p.refuseHost(net.JoinHostPort(h, port))
	}
	portNum, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("invalid port %q", port)
	}
	var addrs []netip.Addr
	literal := false
	if a, err := netip.ParseAddr(host); err == nil {
		addrs, literal = []netip.Addr{a}, true
	} else if addrs, err = p.lookupIP(ctx, host); err != nil {
		return nil, err
	}
	var refused, dialErr error
	for _, a := range addrs {
		a = a.Unmap()
		if network == "tcp4" && !a.Is4() || network == "tcp6" && !a.Is6() {
			continue
		}
		if class := addrClass(a); class != "" && !explicit && !p.addrListed(a, port) {
			if refused == nil {
				if literal {
					refused = refusef("net "+h, "--allow-net (private addresses)", "host %q is %s address (list it in --allow-net to allow it)", h, class)
				} else {
					refused = refusef("net "+h, "--allow-net (private addresses)", "host %q resolves to %s address %s (list it in --allow-net to allow it)", h, class, a)
				}
			}
			continue
		}
		d := net.Dialer{Timeout: 30 * time.Second, Control: dialsOnly(a)}
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(portNum)).String())
		if err == nil {
			return conn, nil
		}
		dialErr = err
	}
	switch {
	case dialErr != nil:
		return nil, dialErr
	case refused != nil:
		return nil, refused
	}
	return nil, fmt.Errorf("host %q has no usable address", h)
}

// dialsOnly returns a net.Dialer Control function that refuses to connect
// to anything but want: a last check on the address actually dialled.
func dialsOnly(want netip.Addr) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || ap.Addr().Unmap() != want {
			return refusef("net "+address, "checked address", "dial %s: not the checked address %s", address, want)
		}
		return nil
	}
}
