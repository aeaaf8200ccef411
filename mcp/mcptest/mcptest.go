// Package mcptest finds the real MCP servers skein's tests run against:
// @modelcontextprotocol/server-everything and server-filesystem, and the
// official TypeScript SDK's client, installed with npm from the pinned
// package.json in mcp/testdata/node (`npm ci` there; .ci/run does it).
//
// Without node or the packages a test is skipped with a message naming
// what to install, unless SKEIN_REQUIRE_NODE=1 is set (as in CI), when
// it fails (package internal/nodetest).
package mcptest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/nodetest"
	"github.com/skein-dev/skein/workspace"
)

// Node is an installation of node and the test packages.
type Node struct {
	// Node is the path of the node program.
	Node string
	// Modules is the node_modules directory of the test packages.
	Modules string
}

// Find returns the installation, or skips t (fails it when
// SKEIN_REQUIRE_NODE=1) when node or the packages are missing.
func Find(t testing.TB) *Node {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "testdata", "node")
	node := nodetest.Require(t, dir)
	return &Node{Node: node, Modules: filepath.Join(dir, "node_modules")}
}

// Everything returns the argv of server-everything over stdio.
func (n *Node) Everything() []string {
	return []string{"node", n.script("server-everything")}
}

// Filesystem returns the argv of server-filesystem serving dirs.
func (n *Node) Filesystem(dirs ...string) []string {
	return append([]string{"node", n.script("server-filesystem")}, dirs...)
}

func (n *Node) script(pkg string) string {
	return filepath.Join(n.Modules, "@modelcontextprotocol", pkg, "dist", "index.js")
}

// EverythingHTTP starts server-everything in its Streamable HTTP mode on
// a free loopback port and returns its endpoint; the server is stopped
// when t ends.
func (n *Node) EverythingHTTP(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, n.Node, n.script("server-everything"), "streamableHttp")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), fmt.Sprintf("PORT=%d", port)}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("server-everything (streamableHttp) exited before listening")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything (streamableHttp) did not listen within 30 s")
	}
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
}

// Policy returns the workspace policy of c, its Root a fresh temporary
// directory when c leaves it empty.
func Policy(t testing.TB, c workspace.Config) *workspace.Policy {
	t.Helper()
	if c.Root == "" {
		c.Root = t.TempDir()
	}
	p, err := workspace.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
