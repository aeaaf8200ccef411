// Command skein runs Starlark pipelines of LLM agents: skein run, repl,
// test, sessions and version. See the README for a tour.
package main

import "os"

func main() {
	os.Exit(skein(os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}
