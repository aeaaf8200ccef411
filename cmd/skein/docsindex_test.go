package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsIndexListsEveryPage: docs/README.md links every page of docs/,
// and every page it links exists.
func TestDocsIndexListsEveryPage(t *testing.T) {
	index, err := os.ReadFile("../../docs/README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range regexp.MustCompile(`\]\(([a-z0-9-]+\.md)(#[^)]*)?\)`).FindAllStringSubmatch(string(index), -1) {
		linked[m[1]] = true
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		name := filepath.Base(p)
		if name != "README.md" && !linked[name] {
			t.Errorf("docs/README.md does not list docs/%s", name)
		}
		delete(linked, name)
	}
	for name := range linked {
		t.Errorf("docs/README.md links docs/%s, which does not exist", name)
	}
}

// TestReadmeLayoutListsEveryPackage: the README's Layout table names
// every package of the module (a row "dir/*" covers dir and everything
// below it), and every package it names exists.
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, layout, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	layout, _, _ = strings.Cut(layout, "\n\n"+"`")
	named := map[string]bool{}
	var trees []string
	for _, line := range strings.Split(layout, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
			if dir, ok := strings.CutSuffix(m[1], "/*"); ok {
				trees = append(trees, dir)
			} else {
				named[m[1]] = true
			}
		}
	}
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	packages := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkg := filepath.ToSlash(rel)
		packages[pkg] = true
		covered := named[pkg]
		for _, tree := range trees {
			covered = covered || pkg == tree || strings.HasPrefix(pkg, tree+"/")
		}
		if !covered {
			t.Errorf("the README's Layout table does not list package %s", pkg)
		}
	}
	for name := range named {
		if _, err := os.Stat(filepath.Join(root, name)); !packages[name] && err != nil {
			t.Errorf("the README's Layout table lists %s, which does not exist", name)
		}
	}
}
