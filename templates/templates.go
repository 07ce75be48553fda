// Package templates holds Halley's ready-made process templates for the scenarios of the Comet article (seed
// 003) and a leave request: JSON files in the shape of POST /api/v1/templates, embedded into the binary so that
// they can be loaded with one command.
package templates

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.json
var files embed.FS

// Template is one ready-made template: the body of POST /api/v1/templates.
type Template struct {
	Key         string          `json:"key"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Definition  json.RawMessage `json:"definition"`
	File        string          `json:"-"` // the embedded file it came from
}

// All returns every embedded template, sorted by key. It fails when a file is not a template: malformed JSON,
// an unknown field, a missing key, name or definition, or a key used twice.
func All() ([]Template, error) {
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		return nil, fmt.Errorf("templates: list: %w", err)
	}
	out := make([]Template, 0, len(names))
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("templates: read %s: %w", name, err)
		}
		var t Template
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("templates: %s: %w", name, err)
		}
		if t.Key == "" || t.Name == "" || len(t.Definition) == 0 {
			return nil, fmt.Errorf("templates: %s: key, name and definition are required", name)
		}
		t.File = name
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Template) int { return strings.Compare(a.Key, b.Key) })
	for i := 1; i < len(out); i++ {
		if out[i].Key == out[i-1].Key {
			return nil, fmt.Errorf("templates: key %q is used by %s and %s", out[i].Key, out[i-1].File, out[i].File)
		}
	}
	return out, nil
}

// Ordered returns every embedded template in an order they can be published in: a template after the templates
// its subprocess nodes call (sub-processes are checked at publish: the callee must be published), by key
// otherwise. It fails like All, and when a template calls one that is not embedded or the calls form a circle.
func Ordered() ([]Template, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]Template, len(all))
	for _, t := range all {
		byKey[t.Key] = t
	}
	out := make([]Template, 0, len(all))
	state := map[string]int{} // 1: being placed, 2: placed
	var place func(t Template, path []string) error
	place = func(t Template, path []string) error {
		switch state[t.Key] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("templates: sub-processes call each other in a circle: %s", strings.Join(append(path, t.Key), " → "))
		}
		state[t.Key] = 1
		var def struct {
			Nodes []struct {
				Type     string `json:"type"`
				Template string `json:"template"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(t.Definition, &def); err != nil {
			return fmt.Errorf("templates: %s: %w", t.File, err)
		}
		for _, n := range def.Nodes {
			if n.Type != "subprocess" || n.Template == "" {
				continue
			}
			callee, ok := byKey[n.Template]
			if !ok {
				return fmt.Errorf("templates: %s calls template %q, which is not a ready-made template", t.File, n.Template)
			}
			if err := place(callee, append(path, t.Key)); err != nil {
				return err
			}
		}
		state[t.Key] = 2
		out = append(out, t)
		return nil
	}
	for _, t := range all {
		if err := place(t, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}
