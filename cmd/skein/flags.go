package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// flagDef is one row of a flag table: everything about a flag in one
// place. registerFlags adds the rows to a command's flag set; the help
// shows name, default and usage (and so does docs/cli.md, generated from
// the help), and docs/cli.md's environment table lists every row with an
// env. Adding a flag is a field for its value and one row.
type flagDef struct {
	name string
	// value is where the flag's value goes: a *string, *int, *int64,
	// *uint64, *float64, *bool, *time.Duration or a flag.Value.
	value any
	// def is the default as written on the command line ("": the zero
	// value).
	def string
	// env is the environment variable whose value, when set, replaces
	// def ("": none). envUnit, when set, makes its value a whole number of
	// that unit (AGENT_SESSION_IDLE_TIMEOUT=5 is five minutes).
	env     string
	envUnit time.Duration
	usage   string // one line; "; env NAME" is added for an env
	// defDoc, when set, is what the help says the default is, for a def
	// that depends on the machine (the help, and docs/cli.md, do not).
	defDoc string
}

// registerFlags adds the rows of a flag table to fs. A row's environment
// variable that does not parse as its flag's value leaves the default in
// place and is returned as an error for the command to report (its check
// does).
func registerFlags(fs *flag.FlagSet, defs []flagDef) error {
	var envErr error
	for _, d := range defs {
		if d.usage == "" {
			panic(fmt.Sprintf("flag --%s has no usage line", d.name)) // a bad row, caught by every test
		}
		fl := define(fs, d)
		if d.def != "" {
			if err := fl.Value.Set(d.def); err != nil {
				panic(fmt.Sprintf("flag --%s: bad default %q: %v", d.name, d.def, err)) // a bad row, caught by every test
			}
		}
		if v := os.Getenv(d.env); d.env != "" && v != "" {
			def := fl.Value.String()
			if err := setFromEnv(fl.Value, v, d.envUnit); err != nil {
				fl.Value.Set(def)
				if envErr == nil {
					envErr = fmt.Errorf("environment variable %s=%q is not a valid --%s value", d.env, v, d.name)
				}
			}
		}
		fl.DefValue = fl.Value.String() // the help shows the default in effect
		if d.defDoc != "" {
			fl.DefValue = d.defDoc
		}
	}
	return envErr
}

// define adds the flag of row d to fs with the zero default and returns
// it.
func define(fs *flag.FlagSet, d flagDef) *flag.Flag {
	usage := d.usage
	if d.env != "" {
		usage += "; env " + d.env + envUnitName(d.envUnit)
	}
	switch p := d.value.(type) {
	case *string:
		fs.StringVar(p, d.name, "", usage)
	case *int:
		fs.IntVar(p, d.name, 0, usage)
	case *int64:
		fs.Int64Var(p, d.name, 0, usage)
	case *uint64:
		fs.Uint64Var(p, d.name, 0, usage)
	case *float64:
		fs.Float64Var(p, d.name, 0, usage)
	case *bool:
		fs.BoolVar(p, d.name, false, usage)
	case *time.Duration:
		fs.DurationVar(p, d.name, 0, usage)
	case flag.Value:
		fs.Var(p, d.name, usage)
	default:
		panic(fmt.Sprintf("flag --%s: unsupported value %T", d.name, d.value))
	}
	return fs.Lookup(d.name)
}

// setFromEnv sets v from an environment variable's value, a whole number
// of unit when unit is set.
func setFromEnv(v flag.Value, s string, unit time.Duration) error {
	if unit == 0 {
		return v.Set(s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return err
	}
	if n < 0 || n > int64(math.MaxInt64/unit) {
		return fmt.Errorf("%d is out of range", n) // it would wrap around
	}
	return v.Set((time.Duration(n) * unit).String())
}

// envUnitName is " in minutes" for time.Minute, and so on.
func envUnitName(unit time.Duration) string {
	switch unit {
	case 0:
		return ""
	case time.Second:
		return " in seconds"
	case time.Minute:
		return " in minutes"
	}
	return " in units of " + unit.String()
}

// flagTable is a flag table and the commands that have its flags.
type flagTable struct {
	commands string
	defs     []flagDef
}

// flagTables are the flag tables that rows with an env can be in:
// docs/cli.md's environment table is made from them.
func flagTables() []flagTable {
	return []flagTable{
		{"run, repl, test, serve", new(vmFlags).flags()},
		{"run, repl, serve, sessions, runs", new(storeFlag).flags()},
		{"serve", new(serveFlags).flags()},
	}
}
