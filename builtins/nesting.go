package builtins

import (
	"fmt"
	"slices"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/llm"
)

// Loops run from inside running loops (agent_spawn, or agent_loop called
// by a tool or a callback) are bounded three ways, so that a tool that
// spawns a child holding the same tool cannot recurse until memory runs
// out:
//
//   - depth: at most MaxLoopDepth loops nest on one thread;
//   - iterations: a nested loop's max_iterations is capped at what the
//     loop it runs in has left (its max_iterations less the iterations it
//     and its earlier nested loops used), so a tree of loops makes at
//     most about twice its root's max_iterations model calls;
//   - cost: a nested loop counts its cost against every max_cost_usd
//     budget of the loops it runs in, and stops when one is spent.

// MaxLoopDepth is how deeply agent loops may nest on one thread: the
// top-level loop is depth 1, a sub-agent it spawns depth 2.
const MaxLoopDepth = 8

// loopDepth returns the depth of a loop fn is about to start on thread,
// or an error naming the limit when it would be too deep.
func loopDepth(thread *starlark.Thread, fn string) (int, error) {
	depth := 1
	if parent := currentLoop(thread); parent != nil {
		depth = parent.depth + 1
	}
	if depth > MaxLoopDepth {
		return 0, fmt.Errorf("%s: sub-agent depth limit: this loop would run at depth %d, and loops nest at most %d deep (a tool or callback of a running loop started another loop %d times over)", fn, depth, MaxLoopDepth, depth-1)
	}
	return depth, nil
}

// inheritBudgets returns budgets with the cost budgets of the running
// loop on thread, if any, added: a nested loop's calls count against
// its parents' max_cost_usd.
func inheritBudgets(thread *starlark.Thread, budgets []*llm.Budget) []*llm.Budget {
	parent := currentLoop(thread)
	if parent == nil {
		return budgets
	}
	for _, b := range parent.budgets {
		if !slices.Contains(budgets, b) {
			budgets = append(budgets, b)
		}
	}
	return budgets
}

// left returns the iterations frame has not used itself nor seen its
// nested loops use.
func (f *loopFrame) left() int { return f.maxIterations - f.iterations - f.childIterations }

// budgetSpent is the error of a nested loop started when the running one
// has no iteration left to give.
func budgetSpent(fn string, parent *loopFrame) error {
	return fmt.Errorf("%s: iteration budget spent: the running loop's max_iterations of %d went to %d iterations of its own and %d of its sub-agents, leaving none for another sub-agent", fn, parent.maxIterations, parent.iterations, parent.childIterations)
}

// childBudget returns the max_iterations of a child agent_spawn starts
// from the running loop parent: asked, or (asked 0) half of what parent
// has left, at least 1; an error naming the budget when nothing is left.
// The child's loop caps it at what parent has left (see nestedBudget).
func childBudget(fn string, parent *loopFrame, asked int) (int, error) {
	left := parent.left()
	if left < 1 {
		return 0, budgetSpent(fn, parent)
	}
	if asked == 0 {
		return max(1, left/2), nil
	}
	return asked, nil
}

// nestedBudget returns the max_iterations of a loop fn starts on thread,
// asking for asked: capped, when it runs inside another loop, at what
// that loop has left; an error naming the budget when nothing is left.
func nestedBudget(thread *starlark.Thread, fn string, asked int) (int, error) {
	parent := currentLoop(thread)
	if parent == nil {
		return asked, nil
	}
	left := parent.left()
	if left < 1 {
		return 0, budgetSpent(fn, parent)
	}
	return min(asked, left), nil
}

// endNested charges the loop running on thread, if any, with the
// iterations of frame, a loop that ran inside it and has ended, and of
// frame's own nested loops.
func endNested(thread *starlark.Thread, frame *loopFrame) {
	if parent := currentLoop(thread); parent != nil {
		parent.childIterations += frame.iterations + frame.childIterations
	}
}
