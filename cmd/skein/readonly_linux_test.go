package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/sessions"
	"github.com/skein-dev/skein/sessions/message"
	"github.com/skein-dev/skein/sessions/sqlite"
)

// TestReadOnlyStore makes the session database, its directory, or both
// read-only and runs the commands that read it (which must work) and
// those that write it (which must say what is read-only and that --store
// memory runs without a store, not SQLite's "unable to open database
// file"). Root ignores file modes, so as root the commands run as the
// user nobody.
func TestReadOnlyStore(t *testing.T) {
	run := skeinAsUser(t)
	for _, tc := range []struct {
		name              string
		fileMode, dirMode os.FileMode
		want              string // what the write error names as read-only
	}{
		{"file", 0o444, 0o755, "the file is read-only"},
		{"dir", 0o666, 0o555, "its directory is read-only"},
		{"both", 0o444, 0o555, "read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			path := filepath.Join(dir, "sessions.db")
			b, err := sqlite.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			rec := &sessions.Record{ID: "kept", Status: sessions.StatusActive, CreatedAt: now, UpdatedAt: now,
				Messages: []message.Message{{Role: message.RoleUser, Text: "stored before the store went read-only"}}}
			if err := b.Create(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			b.Close()
			if err := os.WriteFile(filepath.Join(dir, "w.star"), []byte(`agent_session_open("new")`), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{filepath.Dir(dir), filepath.Dir(filepath.Dir(dir))} {
				os.Chmod(p, 0o755)
			}
			os.Chmod(path, tc.fileMode)
			os.Chmod(dir, tc.dirMode)
			t.Cleanup(func() { os.Chmod(dir, 0o755) })

			for _, args := range [][]string{
				{"sessions", "ls"},
				{"sessions", "show", "kept"},
				{"sessions", "export", "kept", "--format", "jsonl"},
				{"runs", "ls"},
			} {
				code, out, errOut := run(dir, append(args, "--store", path)...)
				if code != exitOK || !strings.Contains(out, "kept") && args[0] != "runs" {
					t.Errorf("%q on a read-only store: exit %d\n%s%s", args, code, out, errOut)
				}
			}
			for _, args := range [][]string{
				{"run", "--store", path, filepath.Join(dir, "w.star")},
				{"sessions", "rm", "--store", path, "kept"},
			} {
				code, out, errOut := run(dir, args...)
				if code != exitFailed || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "--store memory") ||
					strings.Contains(errOut, "unable to open database file (14)") {
					t.Errorf("%q on a read-only store: exit %d, want 1 and an error naming what is read-only\n%s%s", args, code, out, errOut)
				}
			}
		})
	}
}

// skeinAsUser returns a function that runs the skein command in dir and
// returns its exit code and output: in this process, or, as root, in a
// copy of the test binary running as the user nobody.
func skeinAsUser(t *testing.T) func(dir string, args ...string) (int, string, string) {
	if os.Geteuid() != 0 {
		return func(dir string, args ...string) (int, string, string) {
			var out, errOut bytes.Buffer
			code := skein(args, stdio{in: strings.NewReader(""), out: &out, err: &errOut})
			return code, out.String(), errOut.String()
		}
	}
	bin := filepath.Join(t.TempDir(), "skein")
	os.Chmod(filepath.Dir(bin), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(bin)), 0o755)
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	return func(dir string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		cmd := &exec.Cmd{Path: bin, Args: append([]string{"skein"}, args...), Dir: filepath.Dir(dir), Stdout: &out, Stderr: &errOut,
			Env:         []string{"HOME=" + filepath.Dir(dir), "PATH=/usr/bin:/bin", "SKEIN_STORE="},
			SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}}
		err := cmd.Run()
		if _, exited := err.(*exec.ExitError); err != nil && !exited {
			t.Errorf("running skein as nobody: %v", err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
	}
}
