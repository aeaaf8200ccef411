package workflow

import (
	"errors"
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/skein-dev/skein/internal/didyoumean"
)

// Env is the environment an edge condition is evaluated in, after the
// stage at the edge's source has run.
type Env struct {
	// Output is the output of the stage that just finished.
	Output string `expr:"output"`
	// Status is that stage's status: an agent stage's loop status (done,
	// stuck, budget_exhausted, timeout); done for llm and fn stages.
	Status string `expr:"status"`
	// Node is the name of that stage's node.
	Node string `expr:"node"`
	// Task is the run's task.
	Task string `expr:"task"`
	// Vars are the run's variables.
	Vars map[string]any `expr:"vars"`
	// Outputs maps each node that has run to its last output.
	Outputs map[string]string `expr:"outputs"`
	// Visits maps each node to how many times it has run (the stage that
	// just finished included).
	Visits map[string]int `expr:"visits"`
	// Steps is the number of stages run so far.
	Steps int `expr:"steps"`
}

// envNames are the names a condition may use (Env's expr tags).
var envNames = []string{"output", "status", "node", "task", "vars", "outputs", "visits", "steps"}

// compileCondition compiles an edge condition once, type-checked against
// Env, and requires a boolean result.
func compileCondition(src string) (*vm.Program, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("'when' is empty (leave it out for an unconditional edge)")
	}
	prog, err := expr.Compile(src, expr.Env(Env{}), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("when %q: %s", src, exprMessage(err))
	}
	return prog, nil
}

// exprMessage is expr's message with its line and column, on one line.
func exprMessage(err error) string {
	var fe *file.Error
	if errors.As(err, &fe) {
		return fmt.Sprintf("%s (line %d, column %d)", didyoumean.UnknownName(fe.Message, envNames), fe.Line, fe.Column+1)
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// eval runs a compiled condition.
func (e *Edge) eval(env *Env) (bool, error) {
	if e.program == nil {
		return true, nil
	}
	out, err := expr.Run(e.program, env)
	if err != nil {
		return false, fmt.Errorf("%s: when %q: %s", e, e.When, exprMessage(err))
	}
	b, ok := out.(bool)
	if !ok {
		return false, fmt.Errorf("%s: when %q: got %T, want bool", e, e.When, out)
	}
	return b, nil
}
