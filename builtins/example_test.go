package builtins_test

import (
	"bytes"
	"fmt"
	"os"

	"github.com/skein-dev/skein/builtins"
	"github.com/skein-dev/skein/vm"
)

// Running a script on a VM with a custom State: its own output writer,
// arguments and a workspace root; the default store is in memory.
func ExampleNewState() {
	var out bytes.Buffer
	st, err := builtins.NewState(vm.Options{Stdout: &out, Args: []string{"world"}, Root: os.TempDir()})
	if err != nil {
		panic(err)
	}
	src := `
s = agent_session_open("greeting")
agent_session_inject(s, {"role": "user", "content": "hello " + argv[0]})
print(agent_session_length(s), agent_session_snapshot(s)["messages"][0]["content"])
`
	if _, err := st.ExecFile("hello.star", src); err != nil {
		fmt.Println(vm.FormatError(err))
		return
	}
	fmt.Print(out.String())
	// Output: 1 hello world
}
