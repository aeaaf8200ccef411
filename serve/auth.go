package serve

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
)

// tokenCookie is the cookie a viewer page sign-in sets.
const tokenCookie = "skein_token"

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

// authorized reports whether r carries the token: as a bearer token, or
// in the cookie a viewer sign-in set.
func (s *Server) authorized(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && s.validToken(strings.TrimSpace(tok))
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		return s.validToken(c.Value)
	}
	return false
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
// the HttpOnly, SameSite=Strict cookie and redirects to the same page
// without the token; a wrong one is refused with a page saying so (401).
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
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	q.Del("token")
	u := *r.URL
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}
