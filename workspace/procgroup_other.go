//go:build !unix

package workspace

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing where process groups are not available:
// only the command itself is killed, not its children.
func setProcessGroup(cmd *exec.Cmd) {}

// killGroup kills cmd's process (an error once it has exited is
// ignored).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}

// terminateGroup kills cmd's process: there is no SIGTERM to send.
func terminateGroup(cmd *exec.Cmd) { killGroup(cmd) }

// exitCode returns the exit status of a finished process.
func exitCode(ps *os.ProcessState) int { return ps.ExitCode() }
