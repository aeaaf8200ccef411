//go:build !unix

package main

import "os"

// minorFaults: the system does not report page faults.
func minorFaults(*os.ProcessState) (int64, bool) { return 0, false }
