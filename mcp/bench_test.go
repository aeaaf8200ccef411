package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/mcp"
	"github.com/skein-dev/skein/mcp/mcptest"
	"github.com/skein-dev/skein/workspace"
)

// rawClient speaks JSON-RPC to a stdio MCP server with nothing in
// between: a line written, lines read until the answer. Its round trip
// is the server's own time (and the pipe's), the baseline of
// BenchmarkEchoStdio.
type rawClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
}

func startRaw(b *testing.B, argv []string) *rawClient {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &rawClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}
	b.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	c.call(b, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`)
	fmt.Fprintln(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// call sends one request and reads up to its response.
func (c *rawClient) call(b *testing.B, method, params string) []byte {
	c.id++
	fmt.Fprintf(c.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", c.id, method, params)
	for {
		line, err := c.out.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		var msg struct {
			ID *int `json:"id"`
		}
		if json.Unmarshal(line, &msg) == nil && msg.ID != nil && *msg.ID == c.id {
			return line
		}
	}
}

// BenchmarkEchoStdio measures what a tool call through mcp.Server adds
// to a stdio server's own time: each iteration calls server-everything's
// echo once through mcp.Server (schema validation, the SDK, result
// mapping) and once through rawClient on a second process of the same
// server, side by side. It reports the medians of both, their
// difference (added-µs) and the difference over the first and the last
// tenth of the run (flat over the run). Run it with -benchtime=1000x.
func BenchmarkEchoStdio(b *testing.B) {
	n := mcptest.Find(b)
	p := mcptest.Policy(b, workspace.Config{AllowCmds: []string{"node"}})
	srv, err := mcp.Connect(context.Background(), mcp.Spec{Command: n.Everything()}, p)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	raw := startRaw(b, append([]string{n.Node}, n.Everything()[1:]...))
	args := map[string]any{"message": "hello"}
	ctx := context.Background()
	for range 20 { // warm both up
		if _, err := srv.Call(ctx, "echo", args, nil); err != nil {
			b.Fatal(err)
		}
		raw.call(b, "tools/call", `{"name":"echo","arguments":{"message":"hello"}}`)
	}
	viaSkein := make([]time.Duration, 0, b.N)
	viaRaw := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r, err := srv.Call(ctx, "echo", args, nil)
		viaSkein = append(viaSkein, time.Since(start))
		if err != nil || r.Text() != "Echo: hello" {
			b.Fatalf("echo: %v %v", r, err)
		}
		start = time.Now()
		raw.call(b, "tools/call", `{"name":"echo","arguments":{"message":"hello"}}`)
		viaRaw = append(viaRaw, time.Since(start))
	}
	b.StopTimer()
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(median(viaSkein)), "skein-µs")
	b.ReportMetric(us(median(viaRaw)), "raw-µs")
	b.ReportMetric(us(median(viaSkein)-median(viaRaw)), "added-µs")
	if tenth := b.N / 10; tenth > 0 {
		b.ReportMetric(us(median(viaSkein[:tenth])-median(viaRaw[:tenth])), "added-first-µs")
		b.ReportMetric(us(median(viaSkein[b.N-tenth:])-median(viaRaw[b.N-tenth:])), "added-last-µs")
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
