package serve

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// tokenCookie is the name of the cookie a viewer page sign-in sets,
// before its port (see cookieName).
const tokenCookie = "skein_token"

// cookieName is the sign-in cookie's name for the server r was sent to:
// skein_token_PORT, the port of the request's Host. A browser sends a
// host's cookies to every port of it, so two servers on one host
// sharing a name would replace each other's sign-in.
func cookieName(r *http.Request) string {
	if _, port, err := net.SplitHostPort(r.Host); err == nil && port != "" {
		return tokenCookie + "_" + port
	}
	return tokenCookie
}

// cookieValue is what the sign-in cookie holds: an HMAC of the token,
// not the token, so a cookie sent to another port of the host (cookies
// ignore ports) does not give away the bearer token.
func (s *Server) cookieValue() string {
	m := hmac.New(sha256.New, []byte(s.cfg.Token))
	m.Write([]byte("skein viewer sign-in cookie"))
	return hex.EncodeToString(m.Sum(nil))
}

// NewToken returns a random token: 32 bytes from crypto/rand, hex.
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// validToken reports whether got is the server's token, in time that
// does not depend on where they differ (both are hashed first, so not
// on their lengths either).
func (s *Server) validToken(got string) bool {
	a := sha256.Sum256([]byte(got))
	b := sha256.Sum256([]byte(s.cfg.Token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// How a request is authenticated.
type authMethod int

const (
	authNone   authMethod = iota // no token, or a wrong one
	authBearer                   // Authorization: Bearer TOKEN
	authCookie                   // the cookie a viewer sign-in set
)

// authorized reports how r carries the token: as a bearer token, or in
// the cookie a viewer sign-in set (authNone: neither, or a wrong one).
func (s *Server) authorized(r *http.Request) authMethod {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") && s.validToken(strings.TrimSpace(tok)) {
			return authBearer
		}
		return authNone
	}
	if c, err := r.Cookie(cookieName(r)); err == nil {
		want := s.cookieValue()
		if subtle.ConstantTimeCompare([]byte(c.Value), []byte(want)) == 1 {
			return authCookie
		}
	}
	return authNone
}

// checkSameOrigin refuses a request authenticated by the viewer's
// cookie that a page of another origin may have made the browser send.
// SameSite=Strict is not enough: a page on another port of the same
// host is same-site, and its auto-submitting text/plain form carried the
// cookie. So, for cookie requests:
//
//   - Sec-Fetch-Site, when sent, must be same-origin ("none", a URL
//     typed into the address bar, for GET and HEAD only);
//   - Origin, when sent, must be this server (the request's Host);
//   - a state-changing request (not GET or HEAD) with a body must send
//     it as application/json, which no form can and another origin's
//     script cannot without a CORS preflight the server never grants;
//   - one without a body must carry same-origin evidence: Sec-Fetch-Site
//     same-origin or a matching Origin (browsers send one of them on
//     every such request).
//
// Bearer requests are not checked: a browser never adds the header on
// its own.
func checkSameOrigin(r *http.Request) *apiError {
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	site := r.Header.Get("Sec-Fetch-Site")
	origin := r.Header.Get("Origin")
	refuse := func(why string) *apiError {
		return errorf(http.StatusForbidden, "cross_origin", "cross-origin request refused: %s; the viewer's cookie is accepted only from the viewer's own pages (other clients send Authorization: Bearer TOKEN)", why)
	}
	switch {
	case site == "same-origin", site == "":
	case site == "none" && safe:
	default:
		return refuse("Sec-Fetch-Site is " + truncate(site, 20))
	}
	if origin != "" && !originIsHost(origin, r.Host) {
		return refuse("Origin " + truncate(origin, 60) + " is not this server")
	}
	if safe {
		return nil
	}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		if !isJSON(r) {
			return errorf(http.StatusUnsupportedMediaType, "bad_content_type", "a request signed in with the viewer's cookie must send its body as application/json (got %q)", truncate(r.Header.Get("Content-Type"), 40))
		}
		return nil
	}
	if site != "same-origin" && origin == "" && !isJSON(r) {
		return refuse("no Origin or Sec-Fetch-Site header shows it comes from this server")
	}
	return nil
}

// originIsHost reports whether the Origin header origin names host (the
// request's Host: host[:port]).
func originIsHost(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (an opaque origin) included
	}
	return strings.EqualFold(u.Host, host)
}

// isJSON reports whether r's Content-Type is application/json.
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// signInFailedPage is the page a sign-in link with a wrong token shows.
const signInFailedPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign-in failed · skein</title></head>
<body><h1>Sign-in failed</h1>
<p>The token in this link is not the server's token. Open the link with the token
<code>skein serve</code> printed at start (or the one in <code>--token-file</code> or
<code>SKEIN_SERVE_TOKEN</code>): <code>http://HOST:PORT/?token=TOKEN</code>.</p>
</body></html>
`

// signIn handles a viewer page opened with ?token=: a right token sets
// the HttpOnly, SameSite=Strict cookie (named for the port, holding an
// HMAC of the token: see cookieName and cookieValue) and redirects to
// the same page without the token; a wrong one is refused with a page
// saying so (401).
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tok := q.Get("token")
	if !s.validToken(tok) {
		// A person opened this link in a browser: a page, not the API's JSON.
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", viewerCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, signInFailedPage)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(r), Value: s.cookieValue(), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	q.Del("token")
	u := *r.URL
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}
