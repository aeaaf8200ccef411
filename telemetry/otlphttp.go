package telemetry

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The exporter's HTTP/1.1 connection.
//
// An export is one POST, written and answered on the exporting
// goroutine over a connection kept from one export to the next: the
// request's head and the spans' chunks go out in one vectored write
// (writev) and the response is read back on the same goroutine. With
// net/http's Transport an export cost about three times the CPU (its
// connection's reading and writing goroutines woken for every request,
// the body copied through a 32 KB buffer allocated each time), which a
// loop of quick model and tool calls paid a few times a second. What it
// does not do that net/http's client did: follow redirects, speak
// HTTP/2 over TLS, use a proxy (the exporter never did: it talks to the
// collector it was given). A connection the collector closed while idle
// is found when the next export fails before any of the response: that
// export is sent again once on a new connection.

// otlpConn is an HTTP/1.1 connection to the traces endpoint.
type otlpConn struct {
	addr   string      // host:port
	tls    *tls.Config // nil for http
	header []byte      // the request's head but its Content-Length and final CRLF
	gzip   bool

	conn net.Conn
	br   *bufio.Reader
	head []byte   // the head being written
	bufs [][]byte // the head and the body's parts, for writev
}

// newOTLPConn prepares requests to cfg's endpoint (an http(s) URL,
// otlpConfigFromEnv checked it), not connecting yet.
func newOTLPConn(cfg *otlpConfig) *otlpConn {
	u, _ := url.Parse(cfg.url)
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	c := &otlpConn{addr: net.JoinHostPort(u.Hostname(), port), gzip: cfg.gzip}
	if u.Scheme == "https" {
		c.tls = cfg.tls.Clone()
		if c.tls == nil {
			c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if c.tls.ServerName == "" {
			c.tls.ServerName = u.Hostname()
		}
		c.tls.NextProtos = []string{"http/1.1"}
	}
	h := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\nContent-Type: application/x-protobuf\r\n", u.RequestURI(), u.Host, cfg.userAgent)
	if cfg.gzip {
		h = append(h, "Content-Encoding: gzip\r\n"...)
	}
	keys := make([]string, 0, len(cfg.headers))
	for k := range cfg.headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := textproto.CanonicalMIMEHeaderKey(k)
		switch name {
		case "Host", "User-Agent", "Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding", "Connection":
			continue // the exporter's own
		}
		h = fmt.Appendf(h, "%s: %s\r\n", name, cfg.headers[k])
	}
	c.header = h
	return c
}

// validHeader reports whether k: v can be sent as a header line (k a
// token, v without control characters but tab).
func validHeader(k, v string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	for _, r := range v {
		if (r < ' ' && r != '\t') || r == 0x7f {
			return false
		}
	}
	return true
}

// post sends a request whose body is parts (length bytes in all) and
// returns the response's status and the start of its body, within ctx.
func (c *otlpConn) post(ctx context.Context, parts [][]byte, length int) (status int, msg []byte, err error) {
	for attempt := 0; ; attempt++ {
		reused := c.conn != nil
		if !reused {
			if err := c.dial(ctx); err != nil {
				return 0, nil, err
			}
		}
		var answered bool
		status, msg, answered, err = c.roundTrip(ctx, parts, length)
		if err == nil {
			return status, msg, nil
		}
		c.close()
		if !reused || answered || attempt > 0 || ctx.Err() != nil {
			return 0, nil, err
		}
		// the collector closed the idle connection: again, on a new one
	}
}

func (c *otlpConn) dial(ctx context.Context) error {
	d := net.Dialer{KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	if c.tls != nil {
		tc := tls.Client(conn, c.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return err
		}
		conn = tc
	}
	c.conn = conn
	if c.br == nil {
		c.br = bufio.NewReaderSize(conn, 4<<10)
	} else {
		c.br.Reset(conn)
	}
	return nil
}

// roundTrip writes the request and reads the response; answered is
// whether any of the response was read.
func (c *otlpConn) roundTrip(ctx context.Context, parts [][]byte, length int) (status int, msg []byte, answered bool, err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Time{}
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		return 0, nil, false, err
	}
	c.head = append(append(append(c.head[:0], c.header...), "Content-Length: "...), strconv.Itoa(length)...)
	c.head = append(c.head, "\r\n\r\n"...)
	c.bufs = append(append(c.bufs[:0], c.head), parts...)
	bufs := net.Buffers(c.bufs)
	if _, err := bufs.WriteTo(c.conn); err != nil {
		return 0, nil, false, err
	}
	if _, err := c.br.Peek(1); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return 0, nil, true, err
	}
	msg, err = io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err == nil {
		// the rest of a long answer is read to keep the connection
		var n int64
		n, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if err == nil && n == 64<<10 {
			err = errors.New("response too long")
		}
	}
	resp.Body.Close()
	if err != nil {
		return 0, nil, true, fmt.Errorf("reading the response: %v", err)
	}
	if resp.Close {
		c.close()
	}
	return resp.StatusCode, msg, true, nil
}

// close closes the connection (the next request opens another).
func (c *otlpConn) close() {
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
}
