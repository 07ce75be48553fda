package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/halley-bpm/halley/model"
)

// The state diagrams of docs/engine.md are drawn from the transition tables of model/states.go, between these
// markers.
const (
	engineDocsFile = "docs/engine.md"
	statesBegin    = "<!-- BEGIN state tables: generated from model/states.go by `make generate`; edit the tables there, not this text -->"
	statesEnd      = "<!-- END state tables -->"
)

// spliceStates puts the state tables into the page between its markers.
func spliceStates(page []byte) ([]byte, error) {
	b := bytes.Index(page, []byte(statesBegin))
	e := bytes.Index(page, []byte(statesEnd))
	if b < 0 || e < b {
		return nil, fmt.Errorf("schemagen: %s lacks the markers %q and %q around the state tables", engineDocsFile, statesBegin, statesEnd)
	}
	var out bytes.Buffer
	out.Write(page[:b+len(statesBegin)])
	out.WriteString("\n")
	out.WriteString(stateTables())
	out.Write(page[e:])
	return out.Bytes(), nil
}

// stateTables renders each table as a Mermaid state diagram and a table of its moves.
func stateTables() string {
	var b strings.Builder
	section(&b, "Node states", "A node's state is its current visit's (`nodes[].state`); `[*]` is a node not visited yet. "+
		"`reset` (a visit undone by a return, a reclaim or a jump) is not shown by the API.", model.NodeMachine)
	section(&b, "Task statuses", "`[*]` is a task not created yet.", model.TaskMachine)
	section(&b, "Instance statuses", "`[*]` is an instance not started yet.", model.InstanceMachine)
	b.WriteString("\n")
	return b.String()
}

func section[S ~string](b *strings.Builder, title, intro string, m *model.Machine[S]) {
	fmt.Fprintf(b, "\n### %s\n\n%s\n\n```mermaid\n%s```\n\n| move | from | to | when |\n|---|---|---|---|\n", title, intro, m.Mermaid())
	for _, t := range m.Transitions {
		from := make([]string, len(t.From))
		for i, f := range t.From {
			from[i] = "`" + string(f) + "`"
			if f == "" {
				from[i] = "none"
			}
		}
		fmt.Fprintf(b, "| %s | %s | `%s` | %s |\n", t.Move, strings.Join(from, ", "), t.To, t.When)
	}
}
