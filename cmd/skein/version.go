package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version reports the module version the binary was built from, or
// "devel" for a build from a work tree.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

func versionCommand(args []string, std stdio) int {
	fs := newFlagSet("version")
	if code, stop := parseFlags(fs, "", args, std); stop {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(std, fs.Name(), "takes no arguments")
	}
	fmt.Fprintf(std.out, "skein %s %s/%s %s\n", version(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	return exitOK
}
