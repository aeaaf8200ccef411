package llm

import (
	"bytes"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

// selfWriting is a request body that writes itself, counting the bytes
// that went out through Read and through WriteTo.
type selfWriting struct {
	r                *bytes.Reader
	readBytes, wrote int64
	writes           int // WriteTo calls that wrote something
}

func (b *selfWriting) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.readBytes += int64(n)
	return n, err
}

func (b *selfWriting) WriteTo(w io.Writer) (int64, error) {
	n, err := b.r.WriteTo(w)
	if n > 0 { // net/http calls it again at the end, to check nothing is left
		b.writes++
	}
	b.wrote += n
	return n, err
}

func (b *selfWriting) Len() int     { return b.r.Len() }
func (b *selfWriting) Close() error { return nil }

// echoServer answers every request with the body it received.
func echoServer(tls bool) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(body)
	})
	if tls {
		return httptest.NewTLSServer(h)
	}
	return httptest.NewServer(h)
}

// post sends body (of length n) with client and returns what the server
// received.
func post(t *testing.T, client *http.Client, url string, body io.Reader, n int) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(n)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	return got
}

// TestHTTPClientBodyWritesItself checks that NewHTTPClient's connections
// let a request body that writes itself do so (in one call, none of it
// read through Read), that any other body is sent as before, and that
// both arrive whole, small or larger than any buffer, over plain HTTP
// and over TLS.
func TestHTTPClientBodyWritesItself(t *testing.T) {
	for _, tls := range []bool{false, true} {
		srv := echoServer(tls)
		client := NewHTTPClient()
		if tls {
			roots := x509.NewCertPool()
			roots.AddCert(srv.Certificate())
			client.Transport.(*http.Transport).TLSClientConfig.RootCAs = roots
		}
		for _, size := range []int{10, 300 << 10} {
			data := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
			b := &selfWriting{r: bytes.NewReader(data)}
			if got := post(t, client, srv.URL, b, size); !bytes.Equal(got, data) {
				t.Fatalf("tls %v, %d bytes: the server got %d bytes, not the body", tls, size, len(got))
			}
			if !tls && (b.writes != 1 || b.wrote != int64(size) || b.readBytes != 0) {
				t.Errorf("%d bytes: %d WriteTo calls wrote %d bytes, Read gave %d; want the body written in one call", size, b.writes, b.wrote, b.readBytes)
			}
			// A body that only reads, in pieces of any size.
			plain := iotest.HalfReader(strings.NewReader(string(data)))
			if got := post(t, client, srv.URL, plain, size); !bytes.Equal(got, data) {
				t.Fatalf("tls %v, %d bytes of a plain reader: the server got %d bytes, not the body", tls, size, len(got))
			}
		}
		srv.Close()
	}
}
