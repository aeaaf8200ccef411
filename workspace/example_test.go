package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/skein-dev/skein/workspace"
)

func ExampleNew() {
	dir, _ := os.MkdirTemp("", "skein-example")
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "data.jsonl"), []byte(`{"q": "2+2", "a": 4}`+"\n"), 0o644)

	p, err := workspace.New(workspace.Config{Root: dir, Tier: workspace.Sandboxed})
	if err != nil {
		log.Fatal(err)
	}
	rows, err := p.ReadJSONL("data.jsonl")
	fmt.Println(rows, err)

	_, err = p.ReadFile("../etc/passwd")
	fmt.Println(errors.Is(err, workspace.ErrNotAllowed))
	// Output:
	// [map[a:4 q:2+2]] <nil>
	// true
}

func ExamplePolicy_Narrow() {
	dir, _ := os.MkdirTemp("", "skein-example")
	defer os.RemoveAll(dir)
	p, _ := workspace.New(workspace.Config{Root: dir, Tier: workspace.Project, AllowCmds: []string{"go", "git"}})

	// What an agent gets: the same workspace, sandboxed, git only.
	cmds := []string{"git"}
	q, err := p.Narrow(workspace.Narrowing{Tier: workspace.Sandboxed, AllowCmds: &cmds})
	fmt.Println(q.Tier(), q.AllowCmds(), err)

	_, err = q.Narrow(workspace.Narrowing{Tier: workspace.Full})
	fmt.Println(err)
	// Output:
	// sandboxed [git] <nil>
	// cannot widen fs scope from sandboxed to full
}

func ExamplePolicy_Run() {
	p, _ := workspace.New(workspace.Config{Root: ".", AllowCmds: []string{"go"}})
	res, err := p.Run(context.Background(), []string{"go", "vet", "./..."}, workspace.RunOptions{})
	if err != nil {
		log.Fatal(err) // refused, not found, or cancelled
	}
	fmt.Println(res.Code, res.Stdout, res.Stderr)
}

func ExamplePolicy_Do() {
	p, _ := workspace.New(workspace.Config{Root: ".", AllowNet: []string{"api.example.com"}})
	key, err := workspace.LookupSecret("EXAMPLE_API_KEY", nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := p.Do(context.Background(), workspace.HTTPRequest{
		URL:           "https://api.example.com/v1/items",
		SecretHeaders: map[string]workspace.Secret{"Authorization": key},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Body)
}

func ExampleSecret() {
	key := workspace.NewSecret("OPENAI_API_KEY", "sk-...")
	fmt.Println(key)
	fmt.Printf("%q %#v\n", key, key)
	// Output:
	// <secret OPENAI_API_KEY>
	// "<secret OPENAI_API_KEY>" <secret OPENAI_API_KEY>
}
