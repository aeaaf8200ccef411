// Package workflow runs graphs of stages that share conversations through
// the session store.
//
// A Graph is built from plain Go values (Decode) or from a YAML file
// (Load); either way it is validated completely before anything runs:
// the entry node exists, every edge names real nodes, every node is
// reachable from the entry, every key is known and of the right type,
// prompt templates parse, output contracts compile and every edge
// condition compiles, once, as a boolean expr-lang expression against the
// typed environment Env. Errors name the node or the edge
// ("node 'fix': ...", "edge 2 (review -> fix): ...").
//
// Execute runs a graph: from the entry node, one stage at a time, each
// stage handed to an Executor (the caller's: this package runs no model
// and no script itself), then the first outgoing edge whose condition
// holds picks the next node; a node with no edge taken ends the run. A
// stage's conversation lives in the session store under the node's
// model_policy.session_id or, when that is unset, under the stable id
// "<run_id>/<node>", so a node visited twice continues its own
// conversation and two nodes naming one id share a transcript.
//
// Invariants:
//   - The run record (Run) is written to the session store when the run
//     starts and after every stage, before the next stage starts. A stage
//     whose record was written is never run again by a resumed run; a
//     stage interrupted before its record was written is run again.
//   - A resumed run must have the same graph (Fingerprint) as the
//     recorded one; a completed run is returned as recorded.
//   - Events (workflow_start, stage_start, stage_end, workflow_end) are
//     logged into the session of the stage they concern and passed to the
//     caller's observer.
package workflow
