package serve

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// openStream opens an event stream of session id from local address
// from (127.0.0.N) and returns its response (the caller closes it).
func openStream(t *testing.T, ts *testServer, id, from string) *http.Response {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.http.URL+"/api/sessions/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestStreamCaps: one client could open 3,000 event streams (+280 MB);
// now the 101st stream of a client (the default cap) is a 429 saying so,
// and so is one past the server's cap; closing a stream frees its place.
func TestStreamCaps(t *testing.T) {
	ts := newTestServer(t, Config{})
	id := ts.create(nil)
	var open []*http.Response
	for i := range DefaultMaxStreamsPerClient {
		resp := openStream(t, ts, id, "127.0.0.1")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d", i, resp.StatusCode)
		}
		open = append(open, resp)
	}
	resp := openStream(t, ts, id, "127.0.0.1")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("stream %d of one client: %d, want 429", DefaultMaxStreamsPerClient+1, resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), `"code":"too_many_streams"`) || !strings.Contains(string(body), "this client (127.0.0.1) has 100 open") {
		t.Fatalf("stream %d of one client: %d %s", DefaultMaxStreamsPerClient+1, resp.StatusCode, body)
	}
	// Another client is not held back by the first one's streams.
	if resp := openStream(t, ts, id, "127.0.0.2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("another client: %d", resp.StatusCode)
	}
	// A closed stream frees its place.
	open[0].Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := openStream(t, ts, id, "127.0.0.1")
		if resp.StatusCode == http.StatusOK {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's place was not freed: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The server's cap counts every client.
	ts = newTestServer(t, Config{MaxStreams: 4, MaxStreamsPerClient: 2})
	id = ts.create(nil)
	for _, from := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		if resp := openStream(t, ts, id, from); resp.StatusCode != http.StatusOK {
			t.Fatalf("stream from %s: %d", from, resp.StatusCode)
		}
	}
	resp = openStream(t, ts, id, "127.0.0.4")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("stream past the server's cap: %d, want 429", resp.StatusCode)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "the server has 4 open, the most it allows (--max-streams)") {
		t.Fatalf("stream past the server's cap: %d %s", resp.StatusCode, body)
	}
}
