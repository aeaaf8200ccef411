package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/skein-dev/skein/sessions/postgres/pgtest"
)

// grantsOf returns the SQL of docs/security.md's block of grants named
// which ("read-write" or "read-only"), for schema and role: the page's
// names skein, skein_app and skein_reader replaced.
func grantsOf(t *testing.T, which, schema, role, password string) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- grants: " + which + " -->\n```sql\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatalf("docs/security.md has no grants block %q", which)
	}
	sql := string(m[1])
	sql = regexp.MustCompile(`\b(skein_app|skein_reader)\b`).ReplaceAllString(sql, pgx.Identifier{role}.Sanitize())
	sql = strings.ReplaceAll(sql, "'...'", "'"+password+"'")
	return regexp.MustCompile(`\bSCHEMA skein\b`).ReplaceAllString(sql, "SCHEMA "+pgx.Identifier{schema}.Sanitize())
}

// TestPostgresRoles creates, in the test database, a read/write and a
// read-only role with the grants docs/security.md lists, and runs skein
// as each against a schema `skein migrate` made: the read/write role
// runs skein run, skein serve (a turn, its locks and notifications) and
// sessions ls; the read-only role lists and exports; neither can alter
// the schema or run skein migrate. The test role needs CREATEROLE
// (.ci/postgres grants it).
func TestPostgresRoles(t *testing.T) {
	owner := pgtest.DSN(t)
	ctx := context.Background()
	if code := skein([]string{"migrate", "--store", owner}, stdio{out: &bytes.Buffer{}, err: &bytes.Buffer{}}); code != exitOK {
		t.Fatalf("skein migrate as the owner: exit %d", code)
	}
	conn, err := pgx.Connect(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) }) // after the roles are dropped
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		t.Fatal(err)
	}
	var canCreate bool
	if err := conn.QueryRow(ctx, "SELECT rolcreaterole FROM pg_roles WHERE rolname = current_user").Scan(&canCreate); err != nil {
		t.Fatal(err)
	}
	if !canCreate {
		t.Fatal("the test role cannot create roles: grant it CREATEROLE (bash .ci/postgres does: ALTER ROLE skein_test CREATEROLE)")
	}
	dsnAs := map[string]string{}
	for _, which := range []string{"read-write", "read-only"} {
		suffix := make([]byte, 6)
		rand.Read(suffix)
		role := "skein_t_" + strings.ReplaceAll(which, "-", "") + "_" + hex.EncodeToString(suffix)
		password := hex.EncodeToString(suffix) + "-pw"
		if _, err := conn.Exec(ctx, grantsOf(t, which, schema, role, password)); err != nil {
			t.Fatalf("the %s grants of docs/security.md: %v", which, err)
		}
		t.Cleanup(func() {
			// One transaction: the test role joins the role (which
			// CREATEROLE allows), drops its grants, then the role.
			r := pgx.Identifier{role}.Sanitize()
			if _, err := conn.Exec(context.Background(), "GRANT "+r+" TO CURRENT_USER; DROP OWNED BY "+r+"; DROP ROLE "+r); err != nil {
				t.Errorf("dropping role %s: %v", role, err)
			}
		})
		u, err := url.Parse(owner)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.UserPassword(role, password)
		dsnAs[which] = u.String()
	}
	rw, ro := dsnAs["read-write"], dsnAs["read-only"]
	dir := t.TempDir()
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if code := skein(args, stdio{in: strings.NewReader(""), out: &out, err: &errb}); code != want {
			t.Fatalf("skein %s: exit %d, want %d\nstdout: %s\nstderr: %s", args[0], code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	script := dir + "/chat.star"
	os.WriteFile(script, []byte(`agent_loop("hello", session_id = "chat", provider = "mock")
print("ran")
`), 0o644)

	// The read/write role runs a script, serves a turn, lists.
	if out := run(exitOK, "run", "--store", rw, script); !strings.Contains(out, "ran") {
		t.Fatalf("skein run as the read/write role: %s", out)
	}
	p := startServe(t, dir, "--store", rw)
	p.call("POST", "/api/sessions", `{"id": "served"}`, 201)
	p.call("POST", "/api/sessions/served/prompt", `{"text": "0"}`, 202)
	if s := p.waitRunning("served", false); s["status"] != "active" || roles(s) != "user,assistant,tool,assistant" {
		t.Fatalf("a turn served as the read/write role: %v %s", s["status"], roles(s))
	}
	p.call("DELETE", "/api/sessions/served", "", 200)
	if out := run(exitOK, "sessions", "ls", "--store", rw); !strings.Contains(out, "chat") || !strings.Contains(out, "served") {
		t.Fatalf("sessions ls as the read/write role: %s", out)
	}

	// The read-only role lists and exports, and cannot write.
	if out := run(exitOK, "sessions", "ls", "--store", ro); !strings.Contains(out, "chat") {
		t.Fatalf("sessions ls as the read-only role: %s", out)
	}
	if out := run(exitOK, "sessions", "export", "--store", ro, "chat"); !strings.Contains(out, "hello") {
		t.Fatalf("sessions export as the read-only role: %s", out)
	}
	if out := run(exitFailed, "run", "--store", ro, script); !strings.Contains(out, "permission denied") {
		t.Fatalf("skein run as the read-only role: %s", out)
	}

	// Neither can change the schema.
	for which, dsn := range dsnAs {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		for _, ddl := range []string{"CREATE TABLE skein_x (a int)", "ALTER TABLE skein_sessions ADD COLUMN x int",
			"DROP TABLE skein_locks", "CREATE TRIGGER t BEFORE UPDATE ON skein_events FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()"} {
			if _, err := c.Exec(ctx, ddl); err == nil || !strings.Contains(err.Error(), "permission denied") && !strings.Contains(err.Error(), "must be owner") {
				t.Errorf("%s as the %s role: %v, want permission denied", ddl, which, err)
			}
		}
		c.Close(ctx)
		if out := run(exitFailed, "migrate", "--store", dsn); !strings.Contains(out, "permission denied") {
			t.Errorf("skein migrate as the %s role: %s", which, out)
		}
	}
}
