package llm

import (
	"context"
	"io"
	"net"
	"net/http"
)

// NewHTTPClient returns an HTTP client for real providers: the default
// transport, keeping enough idle connections per host that many
// concurrent agent loops against one provider reuse their connections
// instead of reconnecting for every call (Go's default keeps two), and
// sending a request body that can write itself (the provider clients'
// bodies, held as the pieces they were built from) straight from its
// pieces.
//
// net/http copies a request body to a plain (not TLS) connection through
// a new 32 KB buffer per request, one write system call per 32 KB; an
// agent's request resends the whole conversation, so for a local model
// server that is a large allocation per call and a copy and a system
// call per 32 KB of history. The connections of this client take such a
// body in one writev from its pieces instead (see bodyConn). Over TLS
// the transport encrypts the body itself, as always.
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

// selfWritingBody is a request body that knows how many bytes it has
// left (Len) and writes them itself (WriteTo), as the provider clients'
// bodies do.
type selfWritingBody interface {
	io.WriterTo
	Len() int
}

// bodyConn is a connection of NewHTTPClient's transport. net/http sends
// a request body of known length to a plain connection with
// io.Copy(conn, io.LimitReader(body, length)), which reaches ReadFrom: a
// body that writes itself and fits the limit writes itself to the
// connection; anything else is copied as the connection would copy it.
type bodyConn struct {
	net.Conn
}

// ReadFrom writes r to the connection.
func (c bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if b, ok := lr.R.(selfWritingBody); ok && int64(b.Len()) <= lr.N {
			n, err := b.WriteTo(c.Conn)
			lr.N -= n
			return n, err
		}
	}
	return io.Copy(c.Conn, r)
}
