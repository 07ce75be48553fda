// Command schemagen writes what model/ generates: the JSON Schema of a process definition,
// model/definition.schema.json, from the Go types in model/ (their json, jsonschema and jsonschema_extras tags,
// and their doc comments as descriptions), the field reference of docs/templates.md from that schema, and the
// state diagrams of docs/engine.md from the transition tables of model/states.go. `make generate` runs it (and then
// regenerates the front end's TypeScript types from the schema); the tests beside it fail when a committed file is
// stale.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The files schemagen writes, relative to the repository root.
const (
	schemaFile = "model/definition.schema.json"
	docsFile   = "docs/templates.md"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	files, err := generate()
	if err != nil {
		return err
	}
	for _, f := range files {
		if old, err := os.ReadFile(f.path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		if err := os.WriteFile(f.path, f.data, 0o644); err != nil { //nolint:gosec // G306: committed source files, readable like the rest of the tree
			return fmt.Errorf("schemagen: %w", err)
		}
		fmt.Println("schemagen: wrote", f.path)
	}
	return nil
}

// generated is a file schemagen writes, with its content.
type generated struct {
	path string
	data []byte
}

// generate returns the schema file, docs/templates.md with its reference rebuilt and docs/engine.md with its state
// tables redrawn. It runs in the repository root.
func generate() ([]generated, error) {
	s, err := buildSchema()
	if err != nil {
		return nil, err
	}
	schema, err := marshal(s)
	if err != nil {
		return nil, err
	}
	page, err := os.ReadFile(docsFile)
	if err != nil {
		return nil, fmt.Errorf("schemagen: %w", err)
	}
	docs, err := spliceReference(page, reference(s))
	if err != nil {
		return nil, err
	}
	enginePage, err := os.ReadFile(engineDocsFile)
	if err != nil {
		return nil, fmt.Errorf("schemagen: %w", err)
	}
	engineDocs, err := spliceStates(enginePage)
	if err != nil {
		return nil, err
	}
	return []generated{{schemaFile, schema}, {docsFile, docs}, {engineDocsFile, engineDocs}}, nil
}

// repoRoot finds the directory holding go.mod, from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("schemagen: no go.mod above the working directory")
		}
		dir = parent
	}
}
