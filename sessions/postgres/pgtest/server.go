package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireServerEnv names the environment variable that makes a test
// asking for a throw-away server (NewServer) fail, instead of skip, when
// PostgreSQL's server binaries are missing. Setting Env does the same:
// a machine that runs the PostgreSQL tests runs these too.
const RequireServerEnv = "SKEIN_REQUIRE_POSTGRES"

// Server is a throw-away PostgreSQL server of one test, in a temporary
// directory, for tests that stop and restart the database (never the
// shared test server Env names). It listens on 127.0.0.1 on a free port
// and trusts local connections of its role skein.
type Server struct {
	t    testing.TB
	bin  string // the directory of initdb and pg_ctl
	dir  string // the temporary directory: data, socket, log
	port int
	cred *syscall.Credential // the user the server runs as (nil: this one)
}

// NewServer initialises and starts a throw-away server, stopped and
// removed when t ends. It skips t, naming what to install, when initdb
// and pg_ctl are not found under /usr/lib/postgresql (or PATH), unless
// Env or RequireServerEnv is set: then it fails t. Run as root, the
// server runs as the user postgres (initdb refuses root).
func NewServer(t testing.TB) *Server {
	t.Helper()
	bin, err := serverBin()
	if err != nil {
		if Available() || os.Getenv(RequireServerEnv) != "" {
			t.Fatalf("a throw-away PostgreSQL server is needed (%s or %s is set): %v", Env, RequireServerEnv, err)
		}
		t.Skipf("%v: install PostgreSQL's server (Debian: apt-get install postgresql) to run this test", err)
	}
	s := &Server{t: t, bin: bin}
	dir, err := os.MkdirTemp("", "skein-pg-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the throw-away server needs the user postgres to run as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.run("initdb", "-D", s.data(), "-U", "skein", "--auth=trust", "-E", "UTF8", "--no-sync")
	t.Cleanup(func() { s.ctl("stop", "-m", "immediate") })
	s.Start()
	return s
}

// serverBin returns the newest PostgreSQL binary directory holding
// initdb and pg_ctl.
func serverBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && isFile(filepath.Join(filepath.Dir(p), "pg_ctl")) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("initdb and pg_ctl not found in /usr/lib/postgresql/*/bin or PATH")
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// run runs one of the server's binaries as the server's user, failing
// the test with its output when it fails.
func (s *Server) run(name string, args ...string) {
	s.t.Helper()
	if out, err := s.command(name, args...); err != nil {
		s.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func (s *Server) command(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// ctl runs pg_ctl on the server's data directory, ignoring a failure.
func (s *Server) ctl(args ...string) {
	s.command("pg_ctl", append([]string{"-D", s.data()}, args...)...)
}

// DSN returns the URL of the server's database postgres.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://skein@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() {
	s.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", s.port, s.dir)
	s.run("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "start")
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.Connect(context.Background(), s.DSN())
		if err == nil {
			conn.Close(context.Background())
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the throw-away server does not accept connections: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server (fast shutdown: connections are closed) and
// waits until it has.
func (s *Server) Stop() {
	s.t.Helper()
	s.run("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "-t", "60", "stop")
}
