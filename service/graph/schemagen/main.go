// Command schemagen writes the JSON Schema of a process definition, model/definition.schema.json, from the Go
// types in model/ (their json, jsonschema and jsonschema_extras tags, and their doc comments as descriptions), and
// the field reference of docs/templates.md from that schema. `make generate` runs it (and then regenerates the
// front end's TypeScript types from the schema); the tests beside it fail when a committed file is stale.
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
	schema, docs, err := generate()
	if err != nil {
		return err
	}
	for _, f := range []struct {
		path string
		data []byte
	}{{schemaFile, schema}, {docsFile, docs}} {
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

// generate returns the schema file and docs/templates.md with its reference rebuilt. It runs in the repository
// root.
func generate() (schema, docs []byte, err error) {
	s, err := buildSchema()
	if err != nil {
		return nil, nil, err
	}
	if schema, err = marshal(s); err != nil {
		return nil, nil, err
	}
	page, err := os.ReadFile(docsFile)
	if err != nil {
		return nil, nil, fmt.Errorf("schemagen: %w", err)
	}
	docs, err = spliceReference(page, reference(s))
	return schema, docs, err
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
