package llm

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
)

// NewHTTPClient returns an HTTP client for real providers: the default
// transport, keeping enough idle connections per host that many
// concurrent agent loops against one provider reuse their connections
// instead of reconnecting for every call (Go's default keeps two), and
// copying request bodies to plain (not TLS) connections through buffers
// it reuses.
//
// net/http copies a request body it does not hold in memory itself (a
// provider's body is assembled from cached pieces) to a plain connection
// with io.Copy, which allocates a new 32 KB buffer per request. An
// agent's requests resend the whole conversation, so against a local
// model server that was 32 KB of garbage per call once the history
// passed 32 KB, and as much of the garbage collector's work. Over TLS
// the transport encrypts the body itself, as before.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	if dial := t.DialContext; dial != nil {
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return bodyConn{c}, nil
		}
	}
	return &http.Client{Transport: t}
}

// copyBuffers are the buffers bodyConn copies request bodies through:
// 32 KB, as io.Copy's own, so the body goes out in the same writes.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// bodyConn is a connection of NewHTTPClient's transport. net/http writes
// a request body to a plain connection with io.Copy(conn, body), which
// reaches ReadFrom.
type bodyConn struct {
	net.Conn
}

// ReadFrom writes r to the connection through a reused buffer. (A
// *net.TCPConn's own ReadFrom can splice from a file or a socket; a
// provider's request body is neither.)
func (c bodyConn) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, r, *buf)
}
