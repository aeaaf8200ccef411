package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
)

// newServer starts a loopback test server:
//
//	/ok          "hello", with X-Test: a and X-Test: b
//	/echo        the request's method, body and X-Api-Key header
//	/redirect    a 302 to the "to" query parameter
//	/loop        a 302 to itself
//	/big         5000 bytes
//	/slow        waits until the client goes away
func newServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-Test", "a")
		w.Header().Add("X-Test", "b")
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s key=%s", r.Method, body, r.Header.Get("X-Api-Key"))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 5000))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, port
}

// fakeDNS resolves names from a table, offline.
func fakeDNS(table map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range table[host] {
			out = append(out, netip.MustParseAddr(s))
		}
		if len(out) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return out, nil
	}
}

func netPolicy(t *testing.T, allow ...string) *Policy {
	t.Helper()
	p := mustNew(t, Config{Root: tempDir(t), AllowNet: allow})
	p.lookupIP = fakeDNS(map[string][]string{
		"api.example.com":   {"127.0.0.1"},
		"evil.example.com":  {"127.0.0.1"},
		"ten.example.com":   {"10.0.0.1"},
		"mixed.example.com": {"10.0.0.1", "127.0.0.1"},
		"localhost":         {"127.0.0.1"},
	})
	return p
}

func TestHTTPAllowlist(t *testing.T) {
	srv, port := newServer(t)
	ctx := context.Background()
	tests := []struct {
		name  string
		allow []string
		url   string
		want  string // refusal message; "" for allowed
	}{
		{"nothing by default", nil, srv.URL + "/ok",
			`host "127.0.0.1:` + port + `" is not allowed (no hosts are allowed; use --allow-net)`},
		{"metadata address", []string{"api.example.com"}, "http://169.254.169.254/latest/meta-data",
			`host "169.254.169.254" is not allowed (allowed: api.example.com)`},
		{"loopback behind a wildcard", []string{"*.example.com"}, "http://api.example.com:" + port + "/ok",
			`host "api.example.com" resolves to a loopback address 127.0.0.1 (list it in --allow-net to allow it)`},
		{"private behind a wildcard", []string{"*.example.com"}, "http://ten.example.com:" + port + "/ok",
			`host "ten.example.com" resolves to a private address 10.0.0.1 (list it in --allow-net to allow it)`},
		{"loopback literal behind *", []string{"*"}, srv.URL + "/ok",
			`host "127.0.0.1" is a loopback address (list it in --allow-net to allow it)`},
		{"wrong port", []string{"127.0.0.1:1"}, srv.URL + "/ok",
			`host "127.0.0.1:` + port + `" is not allowed (allowed: 127.0.0.1:1)`},
		{"scheme", []string{"*"}, "file:///etc/passwd",
			`url scheme "file" is not allowed (only http and https)`},
		{"wildcard is not the apex", []string{"*.example.com"}, "http://example.com/",
			`host "example.com" is not allowed (allowed: *.example.com)`},
		{"explicit ip", []string{"127.0.0.1"}, srv.URL + "/ok", ""},
		{"explicit ip and port", []string{"127.0.0.1:" + port}, srv.URL + "/ok", ""},
		{"explicit host", []string{"api.example.com"}, "http://api.example.com:" + port + "/ok", ""},
		{"explicit host, any case", []string{"API.Example.COM."}, "http://api.EXAMPLE.com.:" + port + "/ok", ""},
		{"wildcard with the address listed", []string{"*.example.com", "127.0.0.1"}, "http://api.example.com:" + port + "/ok", ""},
		{"private addresses skipped", []string{"*.example.com", "127.0.0.1"}, "http://mixed.example.com:" + port + "/ok", ""},
		{"localhost listed", []string{"localhost"}, "http://localhost:" + port + "/ok", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := netPolicy(t, tt.allow...)
			res, err := p.Do(ctx, HTTPRequest{URL: tt.url})
			if tt.want != "" {
				wantRefusal(t, err)
				if err.Error() != tt.want {
					t.Errorf("got  %s\nwant %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != 200 || res.Body != "hello" || res.Headers["x-test"] != "a, b" || res.Truncated {
				t.Errorf("Do = %+v", res)
			}
		})
	}
}

func TestHTTPRedirects(t *testing.T) {
	srv, port := newServer(t)
	ctx := context.Background()
	redirect := func(to string) string { return srv.URL + "/redirect?to=" + url.QueryEscape(to) }
	tests := []struct {
		name  string
		allow []string
		url   string
		want  string // refusal or error; "" for allowed
	}{
		{"to a host not listed", []string{"127.0.0.1"}, redirect("http://10.0.0.1/"),
			`host "10.0.0.1" is not allowed (allowed: 127.0.0.1)`},
		{"to the metadata address", []string{"127.0.0.1", "*"}, redirect("http://169.254.169.254/"),
			`host "169.254.169.254" is a link-local address (list it in --allow-net to allow it)`},
		{"to a wildcard host resolving to loopback", []string{"localhost", "*.example.com"},
			"http://localhost:" + port + "/redirect?to=" + url.QueryEscape("http://evil.example.com:"+port+"/ok"),
			`host "evil.example.com" resolves to a loopback address 127.0.0.1 (list it in --allow-net to allow it)`},
		{"to another scheme", []string{"127.0.0.1"}, redirect("ftp://127.0.0.1/"),
			`url scheme "ftp" is not allowed (only http and https)`},
		{"to an allowed path", []string{"127.0.0.1"}, redirect("/ok"), ""},
		{"to an allowed host", []string{"127.0.0.1", "api.example.com"}, redirect("http://api.example.com:" + port + "/ok"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := netPolicy(t, tt.allow...)
			res, err := p.Do(ctx, HTTPRequest{URL: tt.url})
			if tt.want != "" {
				wantRefusal(t, err)
				if err.Error() != tt.want {
					t.Errorf("got  %s\nwant %s", err, tt.want)
				}
				return
			}
			if err != nil || res.Body != "hello" || !strings.HasSuffix(res.URL, "/ok") {
				t.Errorf("Do = %+v, %v", res, err)
			}
		})
	}
	t.Run("loop", func(t *testing.T) {
		p := netPolicy(t, "127.0.0.1")
		_, err := p.Do(ctx, HTTPRequest{URL: srv.URL + "/loop"})
		if err == nil || !strings.HasSuffix(err.Error(), "stopped after 10 redirects") || errors.Is(err, ErrNotAllowed) {
			t.Errorf("Do = %v", err)
		}
	})
	t.Run("HTTPClient", func(t *testing.T) {
		p := netPolicy(t, "127.0.0.1")
		c := p.HTTPClient()
		resp, err := c.Get(redirect("http://10.0.0.1/"))
		if err == nil {
			resp.Body.Close()
		}
		wantRefusal(t, err, `host "10.0.0.1" is not allowed`)
		resp, err = c.Get(redirect("/ok"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		_, err = netPolicy(t).HTTPClient().Get(srv.URL)
		wantRefusal(t, err)
	})
}

func TestHTTPSecretHeaders(t *testing.T) {
	srv, _ := newServer(t)
	other, _ := newServer(t) // another origin: same address, another port
	p := netPolicy(t, "127.0.0.1")
	key := NewSecret("API_KEY", "sek-123")
	ctx := context.Background()
	do := func(u string) string {
		t.Helper()
		res, err := p.Do(ctx, HTTPRequest{Method: "POST", URL: u, Body: "data",
			Headers:       map[string]string{"X-Api-Key": "plain"},
			SecretHeaders: map[string]Secret{"X-Api-Key": key}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Body
	}
	if got := do(srv.URL + "/echo"); got != "POST data key=sek-123" {
		t.Errorf("direct: %q", got)
	}
	// A 302 turns the POST into a GET without a body.
	if got := do(srv.URL + "/redirect?to=" + url.QueryEscape(srv.URL+"/echo")); got != "GET  key=sek-123" {
		t.Errorf("same-origin redirect: %q", got)
	}
	if got := do(srv.URL + "/redirect?to=" + url.QueryEscape(other.URL+"/echo")); got != "GET  key=" {
		t.Errorf("cross-origin redirect: %q", got)
	}
}

func TestHTTPLimits(t *testing.T) {
	srv, _ := newServer(t)
	p := netPolicy(t, "127.0.0.1")
	ctx := context.Background()

	res, err := p.Do(ctx, HTTPRequest{URL: srv.URL + "/big", MaxBody: 1000})
	if err != nil || !res.Truncated || len(res.Body) != 1000 {
		t.Errorf("capped body: truncated %v, %d bytes, %v", res.Truncated, len(res.Body), err)
	}
	res, err = p.Do(ctx, HTTPRequest{URL: srv.URL + "/big"})
	if err != nil || res.Truncated || len(res.Body) != 5000 {
		t.Errorf("default cap: %+v, %v", res, err)
	}

	start := time.Now()
	_, err = p.Do(ctx, HTTPRequest{URL: srv.URL + "/slow", Timeout: 100 * time.Millisecond})
	if err == nil || !strings.HasSuffix(err.Error(), "timed out after 100ms") || time.Since(start) > 5*time.Second {
		t.Errorf("timeout: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = p.Do(cctx, HTTPRequest{URL: srv.URL + "/slow"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}

	for _, bad := range []string{"::", "/relative", "http:///nohost"} {
		if _, err := p.Do(ctx, HTTPRequest{URL: bad}); err == nil || errors.Is(err, ErrNotAllowed) {
			t.Errorf("Do(%q) = %v, want an invalid url error", bad, err)
		}
	}
	// Connection refused is an error, not a refusal.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	if _, err := p.Do(ctx, HTTPRequest{URL: "http://" + addr + "/"}); err == nil || errors.Is(err, ErrNotAllowed) ||
		!strings.HasPrefix(err.Error(), "GET http://"+addr+"/: ") {
		t.Errorf("closed port: %v", err)
	}
}

func TestHostRules(t *testing.T) {
	valid := map[string]string{
		"api.example.com":     "api.example.com",
		"API.Example.com.":    "api.example.com",
		"api.example.com:443": "api.example.com:443",
		"*.example.com":       "*.example.com",
		"*.example.com:8080":  "*.example.com:8080",
		"*":                   "*",
		"10.0.0.5":            "10.0.0.5",
		"10.0.0.5:80":         "10.0.0.5:80",
		"::1":                 "::1",
		"[::1]":               "::1",
		"[::1]:8080":          "[::1]:8080",
		"[::ffff:10.0.0.1]":   "10.0.0.1",
		"my_host":             "my_host",
	}
	for in, want := range valid {
		r, err := parseHostRule(in)
		if err != nil || r.entry != want {
			t.Errorf("parseHostRule(%q) = %q, %v, want %q", in, r.entry, err, want)
		}
	}
	for _, in := range []string{"", " a", "http://a", "a/b", "a:0", "a:65536", "a:x", "*.", "a*.b", "*a.com", "a..b", "[::1", "[x]:1", "user@host", "fe80::1%eth0", "a:01"} {
		if _, err := parseHostRule(in); err == nil {
			t.Errorf("parseHostRule(%q) accepted", in)
		}
	}
	if _, err := New(Config{Root: tempDir(t), AllowNet: []string{"http://x"}}); err == nil ||
		err.Error() != `invalid network allowlist entry "http://x": want host, host:port, *.domain or an IP address` {
		t.Errorf("New with a bad entry: %v", err)
	}
}

func TestAddrClass(t *testing.T) {
	tests := map[string]string{
		"8.8.8.8":            "",
		"2606:4700::1111":    "",
		"127.0.0.1":          "a loopback",
		"127.8.9.10":         "a loopback",
		"::1":                "a loopback",
		"10.1.2.3":           "a private",
		"172.16.0.1":         "a private",
		"192.168.1.1":        "a private",
		"fd00::1":            "a private",
		"169.254.169.254":    "a link-local",
		"fe80::1":            "a link-local",
		"0.0.0.0":            "an unspecified",
		"::":                 "an unspecified",
		"224.0.0.1":          "a multicast",
		"ff02::1":            "a multicast",
		"100.64.0.1":         "a carrier-grade NAT",
		"255.255.255.255":    "a reserved",
		"0.1.2.3":            "a reserved",
		"198.18.0.1":         "a reserved",
		"::ffff:10.0.0.1":    "a private",
		"::ffff:127.0.0.1":   "a loopback",
		"64:ff9b::a9fe:a9fe": "a link-local",
		"2002:7f00:1::":      "a loopback",
		"fec0::1":            "a reserved",
	}
	for in, want := range tests {
		if got := addrClass(netip.MustParseAddr(in)); got != want {
			t.Errorf("addrClass(%s) = %q, want %q", in, got, want)
		}
	}
}
