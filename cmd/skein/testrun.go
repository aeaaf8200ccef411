package main

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/skein-dev/skein/vm"
)

// runTests runs cases on up to parallel goroutines and hands each result
// to report in the order of cases, whatever order they finish in, so the
// output of a parallel run is the serial run's. progress is told how many
// have finished as they do. With failFast, or once ctx is done, no test
// starts after a failure; runTests returns how many did not run.
func runTests(ctx context.Context, cases []testCase, parallel int, failFast bool, report func(vm.TestResult), progress func(done, total, failed int)) (notRun int) {
	type outcome struct {
		i   int
		res vm.TestResult
		ran bool
	}
	finished := make(chan outcome, len(cases)) // never blocks a worker
	var stop atomic.Bool
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(parallel, len(cases)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(cases) {
					return
				}
				if stop.Load() || ctx.Err() != nil {
					finished <- outcome{i: i}
					continue
				}
				res := cases[i].run()
				if failFast && failed(res) {
					stop.Store(true)
				}
				finished <- outcome{i: i, res: res, ran: true}
			}
		}()
	}

	got := make([]*outcome, len(cases))
	reported, done, failures := 0, 0, 0
	for done < len(cases) {
		o := <-finished
		got[o.i] = &o
		done++
		if o.ran && failed(o.res) {
			failures++
		}
		for reported < len(cases) && got[reported] != nil {
			if got[reported].ran {
				report(got[reported].res)
			} else {
				notRun++
			}
			got[reported] = nil
			reported++
		}
		progress(done, len(cases), failures)
	}
	wg.Wait()
	return notRun
}

// failed reports whether a result counts as a failure.
func failed(res vm.TestResult) bool {
	return res.Status == vm.TestFail || res.Status == vm.TestError
}

// unasserted reports whether a test passed without checking anything.
func unasserted(res vm.TestResult) bool {
	return res.Status == vm.TestPass && res.Assertions == 0
}
