package graph

import (
	"strings"

	"github.com/halley-bpm/halley/model"
)

// checkSubprocess checks what the schema cannot see in a subprocess node: the template it names (that the
// template exists and calls no one back is the publish check's: service/subprocess), its mappings' paths and
// that completion goes with for_each, and that it has no timeout (nothing would enforce one).
func checkSubprocess(name string, n *model.Node, bad func(string, ...any)) {
	if n.Template != "" && model.ValidTemplateKey(n.Template) != nil { // a missing one is the schema's to report
		bad("subprocess node %q: template %q is not a template key", name, n.Template)
	}
	if n.Timeout != 0 { // nothing would enforce it: the children's own nodes carry their timeouts
		bad("node %q: timeout does not apply to a subprocess node (give the called template's nodes their timeouts)", name)
	}
	if !n.Completion.IsZero() && n.ForEach == "" {
		bad("node %q: completion applies only with for_each", name)
	}
	if n.ForEach != "" && !validPath(n.ForEach) {
		bad("node %q: for_each %q is not a context path", name, n.ForEach)
	}
	for child, parent := range n.Input {
		if !validPath(child) || !validPath(parent) {
			bad("node %q: input %q: %q is not a pair of context paths (child path: parent path, \"$\" the whole context)", name, child, parent)
		}
		if n.ForEach != "" && (child == "item" || child == "index") {
			bad("node %q: input %q: with for_each the child's item and index are set by the node", name, child)
		}
	}
	for parent, child := range n.Output {
		if !validPath(child) || !validPath(parent) {
			bad("node %q: output %q: %q is not a pair of context paths (parent path: child path, \"$\" the whole context)", name, parent, child)
		}
	}
}

// validPath reports a gjson/sjson path a mapping may use: "$", or dotted names without modifiers or queries.
func validPath(p string) bool {
	if p == "$" {
		return true
	}
	if p == "" || len(p) > 255 || strings.ContainsAny(p, "#@|*?!=<>()[]{} \t\n") || strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") ||
		strings.Contains(p, "..") {
		return false
	}
	return true
}
