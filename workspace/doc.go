// Package workspace is skein's policy and access layer for the world
// outside the interpreter: files, commands, network egress and secrets.
//
// A Policy, built once per run with New from a Config (the --workspace,
// --fs-scope, --allow-cmd and --allow-net flags), decides what a pipeline
// may touch, and its methods do the touching: ReadFile, WriteFile, List,
// ReadJSONL, ReadCSV and Search for files, Run for commands, Do and
// HTTPClient for HTTP. A Policy is immutable and safe for concurrent use;
// Narrow returns a copy that is never wider, which is how a script hands a
// restricted policy to one agent loop.
//
// # Where this package sits
//
// This package sits where sessions, compact and llm sit, one layer below builtins: pure Go,
// no go.starlark.net import. The Starlark modules fs, exec and http, the
// built-in agent tools (tools.read_file, tools.run_command, ...) and the
// secret() builtin are thin wrappers in builtins/ that unpack arguments,
// call this package and convert the results, so that every surface goes
// through the same checks.
//
// # File-system scope
//
// The fs scope tier decides where paths may lead:
//
//	tier       reads                                   writes
//	sandboxed  inside Root                             inside Root
//	project    anywhere under the git root of Root     inside Root
//	full       anywhere                                anywhere
//
// The git root is the nearest ancestor of Root (Root included) holding a
// .git directory or file (a worktree or submodule). When there is none,
// project reads are confined to Root, exactly like sandboxed.
//
// A relative path is relative to Root. Every path is cleaned and its
// symbolic links resolved before it is checked (for a path that does not
// exist yet, the symbolic links of its nearest existing parent), so ..
// escapes and links that lead out of scope are refused, with an error that
// names the path as the caller wrote it, the tier and the scope directory.
//
// # Check-then-use races
//
// A path is checked and then opened; something else (a command the run
// allowed, another process) could swap a directory or file for a symbolic
// link in between. The open step therefore does not trust the checked
// path: it opens the scope directory and walks the resolved path below it
// with os.Root, which opens one component at a time relative to the
// previous one without following links implicitly, follows a link only
// when it stays inside the scope directory (and never an absolute one),
// and refuses anything else. The guarantee: every file this package opens,
// creates, lists or searches is beneath the scope directory of its tier at
// the moment it is opened, whatever happened to the path after the check.
// A swap that leads out of scope is refused with ErrNotAllowed. Not
// covered: hard links (a hard link inside the workspace to a file outside
// is indistinguishable from a file), bind mounts, and the scope directory
// and its ancestors themselves, which are trusted. On GOOS=js os.Root
// cannot make this guarantee. Separately, reads refuse anything that is
// not a regular file (a device or a FIFO would block or never end); that
// check is made before and after opening, but a file swapped for a FIFO
// between the two can still make an open block.
//
// # Commands and network
//
// Run executes an allowlisted command with no shell, a minimal
// environment, a time limit that kills the whole process group, and
// bounded output capture. The fs scope does not confine what an allowed
// command does: the allowlist is the control for commands.
//
// Do and HTTPClient reach only allowlisted http and https hosts, refuse
// private, loopback, link-local and similar addresses unless the host or
// the address is listed explicitly, check every resolved address at dial
// time and every redirect, and never use a proxy.
//
// # Secrets
//
// A Secret holds the value of an environment variable and renders as
// <secret NAME> everywhere (fmt, JSON, text, slog). Its value is handed
// out by Reveal, and this package reveals it only in the two places that
// may use it: HTTP header values (HTTPRequest.SecretHeaders) and command
// environments (RunOptions.SecretEnv).
//
// # Errors
//
// Errors do not name a builtin: the same method serves fs.read and
// tools.read_file, so callers prefix their own name ("fs.read: " + err).
// Messages are lowercase with no final period and read well after such a
// prefix. Every refusal by the policy matches ErrNotAllowed with
// errors.Is; I/O errors keep their cause (errors.Is(err, fs.ErrNotExist)
// works) and name the path as the caller wrote it, never a secret.
package workspace
