package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
)

// approval is the run's decision for calls of tools a bound agent lists
// in approve (--approve): yes accepts, no refuses, ask asks on the
// terminal. Without the flag it asks when stdin and stderr are
// terminals, and refuses otherwise.
func (f *vmFlags) approval(std stdio) func(tool string, args map[string]any) (bool, error) {
	mode := f.approve
	if mode == "" {
		mode = "no"
		if isTerminal(std.in) && isTerminal(std.err) {
			mode = "ask"
		}
	}
	switch mode {
	case "yes":
		return func(string, map[string]any) (bool, error) { return true, nil }
	case "ask":
		in := bufio.NewReader(std.in)
		return func(tool string, args map[string]any) (bool, error) {
			b, _ := json.Marshal(args)
			fmt.Fprintf(std.err, "approve %s %s? [y/N] ", tool, b)
			line, err := in.ReadString('\n')
			if err != nil && line == "" {
				fmt.Fprintln(std.err)
				return false, nil // end of input: refuse
			}
			answer := strings.ToLower(strings.TrimSpace(line))
			return answer == "y" || answer == "yes", nil
		}
	}
	return func(string, map[string]any) (bool, error) { return false, nil }
}
