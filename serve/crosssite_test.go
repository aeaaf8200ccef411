package serve

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// signInCookie signs in to ts's viewer with token and returns the cookie
// it sets.
func signInCookie(t *testing.T, ts *testServer, token string) *http.Cookie {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(ts.http.URL + "/?token=" + token)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs := resp.Cookies()
	if resp.StatusCode != http.StatusSeeOther || len(cs) != 1 {
		t.Fatalf("sign-in: %d, cookies %v", resp.StatusCode, cs)
	}
	return cs[0]
}

// browserRequest sends what a browser would: the cookie, and the given
// headers (Origin, Sec-Fetch-Site, Content-Type), no Authorization.
func browserRequest(t *testing.T, ts *testServer, c *http.Cookie, method, path, body string, headers map[string]string) *response {
	t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequest(method, ts.http.URL+path, rd)
	} else {
		req, err = http.NewRequest(method, ts.http.URL+path, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(c)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return &response{status: resp.StatusCode, header: resp.Header, body: []byte(`{}`)} // a stream: do not wait for its end
	}
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: []byte(sb.String())}
}

// TestCrossSiteCookie reproduces the attack of issue 26 (item 8): a page
// on another port of the same host is same-site, so the SameSite=Strict
// cookie goes with its auto-submitting text/plain form, and the form ran
// a turn. Requests carrying the viewer's cookie must now come from the
// viewer's own origin, and a state-changing one must send JSON.
func TestCrossSiteCookie(t *testing.T) {
	ts := newTestServer(t, Config{})
	id := ts.create(nil)
	c := signInCookie(t, ts, testToken)
	if strings.Contains(c.Value, testToken) {
		t.Fatalf("the cookie holds the token itself: %q", c.Value)
	}
	self := ts.http.URL // http://127.0.0.1:PORT
	u, _ := url.Parse(self)
	otherPort := "http://" + u.Hostname() + ":1"
	prompt := "/api/sessions/" + id + "/prompt"
	// What <form enctype="text/plain" method="post"> with one field named
	// {"text":"run and value  rm"} sends: NAME=VALUE, valid JSON.
	form := `{"text":"run= rm"}`

	refused := []struct {
		name         string
		method, path string
		body         string
		headers      map[string]string
		status       int
		code         string
	}{
		{"text/plain form from another port", "POST", prompt, form,
			map[string]string{"Content-Type": "text/plain", "Origin": otherPort, "Sec-Fetch-Site": "same-site"}, 403, "cross_origin"},
		{"form from another port, no Sec-Fetch-Site", "POST", prompt, form,
			map[string]string{"Content-Type": "text/plain", "Origin": otherPort}, 403, "cross_origin"},
		{"form from a browser that sends neither header", "POST", prompt, form,
			map[string]string{"Content-Type": "text/plain"}, 415, "bad_content_type"},
		{"urlencoded form, same origin", "POST", prompt, "text=hi",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": self, "Sec-Fetch-Site": "same-origin"}, 415, "bad_content_type"},
		{"create from another site", "POST", "/api/sessions", "{}",
			map[string]string{"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}, 403, "cross_origin"},
		{"body-less cancel with no origin evidence", "POST", "/api/sessions/" + id + "/cancel", "",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 403, "cross_origin"},
		{"delete from another origin", "DELETE", "/api/sessions/" + id, "",
			map[string]string{"Origin": "http://evil.example"}, 403, "cross_origin"},
		{"opaque origin", "POST", prompt, `{"text": "hi"}`,
			map[string]string{"Content-Type": "application/json", "Origin": "null"}, 403, "cross_origin"},
		{"read from another port", "GET", "/api/sessions/" + id + "/messages", "",
			map[string]string{"Sec-Fetch-Site": "same-site"}, 403, "cross_origin"},
		{"event stream from another site", "GET", "/api/sessions/" + id + "/events", "",
			map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, 403, "cross_origin"},
	}
	for _, tc := range refused {
		r := browserRequest(t, ts, c, tc.method, tc.path, tc.body, tc.headers)
		if r.status != tc.status || r.code() != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	ts.waitIdle(id)
	r := ts.do("GET", "/api/sessions/"+id, nil)
	if st := r.json()["status"]; st != "active" || len(r.json()["messages"].([]any)) != 0 {
		t.Fatalf("the refused requests changed the session: %s", r.body)
	}

	// What the viewer sends is accepted.
	same := map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin"}
	jsonSame := map[string]string{"Origin": self, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
	if r := browserRequest(t, ts, c, "GET", "/api/sessions", "", map[string]string{"Sec-Fetch-Site": "same-origin"}); r.status != 200 {
		t.Fatalf("viewer list: %d %s", r.status, r.body)
	}
	if r := browserRequest(t, ts, c, "GET", "/api/sessions", "", map[string]string{"Sec-Fetch-Site": "none"}); r.status != 200 {
		t.Fatalf("address bar: %d %s", r.status, r.body)
	}
	if r := browserRequest(t, ts, c, "POST", prompt, `{"text": "hello"}`, jsonSame); r.status != http.StatusAccepted {
		t.Fatalf("viewer prompt: %d %s", r.status, r.body)
	}
	ts.waitIdle(id)
	if r := browserRequest(t, ts, c, "POST", "/api/sessions", `{}`, map[string]string{"Content-Type": "application/json; charset=utf-8"}); r.status != http.StatusCreated {
		t.Fatalf("JSON create without origin headers (an old browser): %d %s", r.status, r.body)
	}
	if r := browserRequest(t, ts, c, "POST", "/api/sessions/"+id+"/complete", "", same); r.status != 200 {
		t.Fatalf("viewer complete: %d %s", r.status, r.body)
	}
	// A bearer token is not sent by a browser on its own: the checks do
	// not apply (curl -d sends a form content type).
	r = ts.doAuth("POST", "/api/sessions", `{}`, "Bearer "+testToken)
	ts.expect(r, http.StatusCreated, "")
}

// TestCookiePerPort: two servers on one host, signed in from one
// browser (whose cookies ignore ports), each keep their own sign-in.
// Before, the second sign-in replaced the first one's cookie.
func TestCookiePerPort(t *testing.T) {
	a := newTestServer(t, Config{})
	b := newTestServer(t, Config{Token: "another-token-9876543210"})
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	for _, x := range []struct {
		ts    *testServer
		token string
	}{{a, testToken}, {b, "another-token-9876543210"}} {
		resp, err := client.Get(x.ts.http.URL + "/?token=" + x.token)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	for i, ts := range []*testServer{a, b} {
		req, _ := http.NewRequest("GET", ts.http.URL+"/api/sessions", nil)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("server %d after both sign-ins: %d", i, resp.StatusCode)
		}
	}
}
