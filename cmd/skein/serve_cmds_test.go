package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// serveCmds are the testscript commands of the skein serve scripts.
var serveCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// freeport VAR: set VAR to a free loopback TCP port
	"freeport": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: freeport VAR")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		ts.Check(err)
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ts.Setenv(args[0], strconv.Itoa(port))
	},
	// waithttp URL: wait (up to a minute) until URL answers 200
	"waithttp": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 1 {
			ts.Fatalf("usage: waithttp URL")
		}
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := http.Get(args[0])
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
			if time.Now().After(deadline) {
				ts.Fatalf("waithttp %s: not ready after a minute (%v)", args[0], err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	},
	// http METHOD URL [BODY]: send a request with the bearer token of
	// $SKEIN_SERVE_TOKEN (if set) and print the status line, then the
	// body, to stdout
	"http": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 || len(args) > 3 {
			ts.Fatalf("usage: http METHOD URL [BODY]")
		}
		var body io.Reader
		if len(args) == 3 {
			body = strings.NewReader(args[2])
		}
		req, err := http.NewRequest(args[0], args[1], body)
		ts.Check(err)
		if tok := ts.Getenv("SKEIN_SERVE_TOKEN"); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		ts.Check(err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		ts.Check(err)
		fmt.Fprintf(ts.Stdout(), "%d %s\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), data)
	},
}

// withServeCmds adds serveCmds to cmds.
func withServeCmds(cmds map[string]func(ts *testscript.TestScript, neg bool, args []string)) map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	for k, v := range serveCmds {
		cmds[k] = v
	}
	return cmds
}
