package vm

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/skein-dev/skein/workspace"
)

func TestDefaultWorkspaceIsSandboxedAtRoot(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := newTestState(t, dir)
	p, err := WorkspaceOf(st.NewThread("x"))
	if err != nil {
		t.Fatal(err)
	}
	if p != st.Workspace || p.Root() != dir || p.Tier() != workspace.Sandboxed || len(p.AllowCmds()) != 0 || len(p.AllowNet()) != 0 {
		t.Fatalf("default policy: %v", p)
	}
	if _, err := New(Options{Root: filepath.Join(dir, "missing")}); err == nil || !strings.Contains(err.Error(), "workspace root") {
		t.Fatalf("New with a missing root: %v", err)
	}
}

func TestWithWorkspace(t *testing.T) {
	st := newTestState(t, t.TempDir())
	thread := st.NewThread("x")
	cmds := []string{}
	narrow, err := st.Workspace.Narrow(workspace.Narrowing{AllowCmds: &cmds})
	if err != nil {
		t.Fatal(err)
	}
	restore := WithWorkspace(thread, narrow)
	if p, _ := WorkspaceOf(thread); p != narrow {
		t.Fatalf("WorkspaceOf inside = %v", p)
	}
	restore()
	if p, _ := WorkspaceOf(thread); p != st.Workspace {
		t.Fatalf("WorkspaceOf after restore = %v", p)
	}
	if _, err := WorkspaceOf(&starlark.Thread{}); err == nil {
		t.Fatal("WorkspaceOf(foreign thread) succeeded")
	}
}

func TestJSONNumberToStarlark(t *testing.T) {
	for in, want := range map[string]string{
		"42": "42", "-7": "-7", "123456789012345678901234567890": "123456789012345678901234567890",
		"2.5": "2.5", "1e3": "1000.0", "-0.125": "-0.125", "1e400": "+inf",
	} {
		v := ToStarlark(json.Number(in))
		if v.String() != want {
			t.Errorf("ToStarlark(json.Number(%s)) = %s (%s), want %s", in, v, v.Type(), want)
		}
	}
	if ToStarlark(json.Number("42")).Type() != "int" || ToStarlark(json.Number("4.0")).Type() != "float" {
		t.Error("json.Number types")
	}
}

// fakeSecret is a Secret whose value sits in a field.
type fakeSecret struct{ value string }

func (fakeSecret) SecretName() string    { return "TOKEN" }
func (fakeSecret) String() string        { return "<secret TOKEN>" }
func (fakeSecret) Type() string          { return "secret" }
func (fakeSecret) Freeze()               {}
func (fakeSecret) Truth() starlark.Bool  { return true }
func (fakeSecret) Hash() (uint32, error) { return 0, nil }

func TestFromStarlarkRefusesSecrets(t *testing.T) {
	d := starlark.NewDict(1)
	_ = d.SetKey(starlark.String("auth"), fakeSecret{"hunter2"})
	_, err := FromStarlark(d, "metadata")
	if err == nil || err.Error() != "metadata.auth: <secret TOKEN> is a secret, which never becomes data (pass it only in http headers or exec env)" {
		t.Fatalf("err = %v", err)
	}
}
