// Package eval runs evaluations: a task over the cases of a dataset,
// under one or more variants (model, prompt and option sets), each case
// repeated, every result scored by scorers, and the scores summed up in a
// matrix (variant × scorer: mean, pass rate, 95% interval, cost and
// latency percentiles) that is stored with the run and compared with an
// earlier run (deltas, regressions).
//
// The pieces:
//
//   - datasets (LoadDataset): a JSONL or CSV file, each line or row one
//     case; errors name the case;
//   - Suite: what is evaluated — its cases, variants and scorer names,
//     and how one case is run and scored. Package evalfile builds one
//     from a `skein eval` file (DATASET, task, score_* functions,
//     VARIANTS);
//   - Run: the runner, which runs every case × variant × repeat
//     concurrently (Options.Parallel), each on its own Starlark thread and
//     session, and reports progress;
//   - Cache: a response cache in front of real providers, keyed by the
//     request's fingerprint and the repeat index, kept in the session
//     store, so that a run repeated without changes costs nothing;
//   - the stored run (Record, Save, Previous, Load) and its comparison
//     with a baseline (Compare);
//   - reports: the terminal matrix (WriteText), JSON (WriteJSON) and a
//     self-contained HTML page with a chart per scorer (WriteHTML).
//
// The package never imports Starlark (evalfile does): the runner,
// statistics, cache, storage and reports are plain Go, so that skein
// serve can read the stored runs without the interpreter.
package eval
