package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/mcp"
)

const mcpUsage = "[flags] FILE.star"

// mcpCommand implements `skein mcp FILE.star [--addr HOST:PORT]`: the
// script's documented top-level functions are served as MCP tools, over
// stdio (stdout then carries only protocol messages: print output and
// logs go to stderr) or, with --addr, over Streamable HTTP behind a
// bearer token as for serve.
func mcpCommand(args []string, std stdio) int {
	fs := newFlagSet("mcp")
	var vf vmFlags
	vf.register(fs)
	vf.registerStore(fs)
	var addr, tokenFile string
	fs.StringVar(&addr, "addr", "", "serve Streamable HTTP on `HOST:PORT` instead of stdio (a non-loopback address needs a token of 16 random bytes or more from --token-file or SKEIN_SERVE_TOKEN)")
	fs.StringVar(&tokenFile, "token-file", "", "with --addr: file holding the bearer token (else SKEIN_SERVE_TOKEN, else a generated one is printed)")
	if code, stop := parseFlags(fs, mcpUsage, args, std); stop {
		return code
	}
	if err := vf.check(); err != nil {
		return usageError(std, fs.Name(), err.Error())
	}
	switch {
	case fs.NArg() == 0:
		return usageError(std, fs.Name(), "missing FILE.star: a script whose documented functions are the tools")
	case fs.NArg() > 1:
		return usageError(std, fs.Name(), fmt.Sprintf("unexpected argument %q (one script per server)", fs.Arg(1)))
	case addr == "" && tokenFile != "":
		return usageError(std, fs.Name(), "--token-file is for --addr (stdio needs no token)")
	}
	var token string
	if addr != "" {
		var generated bool
		var err error
		if token, generated, err = serveToken(tokenFile); err != nil {
			return usageError(std, fs.Name(), err.Error())
		}
		if err := checkServeToken(token, generated, addr, tokenFile); err != nil {
			return usageError(std, fs.Name(), err.Error())
		}
		if generated {
			// printed once, here, and nowhere else
			fmt.Fprintf(std.err, "skein mcp: token %s\n", token)
		}
	}
	file := fs.Arg(0)
	src, err := os.ReadFile(file)
	if err != nil {
		return usageError(std, fs.Name(), fmt.Sprintf("cannot read %s: %v", file, underlying(err)))
	}
	logs := stdio{in: std.in, out: std.err, err: std.err}
	st, closeVM, err := vf.newState(logs, vmConfig{root: filepath.Dir(file)})
	if err != nil {
		return failState(std, fs.Name(), err)
	}
	defer closeVM()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	end := st.Begin(ctx)
	defer end()
	globals, err := st.ExecFile(file, src)
	if err != nil {
		return scriptFailed(std, &vf, err)
	}
	tools, err := builtins.ScriptTools(st, globals, vf.timeout)
	if err != nil {
		fmt.Fprintf(std.err, "%s: %s: %v\n", fs.Name(), file, err)
		return exitUsage
	}
	if len(tools) == 0 {
		fmt.Fprintf(std.err, "%s: %s defines no function with a docstring: nothing to serve\n", fs.Name(), file)
		return exitUsage
	}
	name := strings.TrimSuffix(filepath.Base(file), ".star")
	svc, err := mcp.NewService(name, version(), tools)
	if err != nil {
		fmt.Fprintf(std.err, "%s: %s: %v\n", fs.Name(), file, err)
		return exitUsage
	}
	if addr == "" {
		err = svc.ServeStdio(ctx, io.NopCloser(std.in), nopWriteCloser{std.out})
	} else {
		err = serveMCPHTTP(ctx, svc, addr, token, std)
	}
	if err != nil {
		fmt.Fprintf(std.err, "%s: %v\n", fs.Name(), err)
		return exitFailed
	}
	return exitOK
}

// serveMCPHTTP serves svc on addr until ctx is done.
func serveMCPHTTP(ctx context.Context, svc *mcp.Service, addr, token string, std stdio) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	hs := &http.Server{Handler: svc.Handler(token), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	fmt.Fprintf(std.err, "skein mcp: listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
