// Package condition evaluates the conditions on template edges: MongoDB find() queries (a JSON query object)
// matched against an instance context (a JSON document). A condition is compiled once into a small tree of
// matchers and then evaluated many times; documents are read in place with gjson, never decoded.
//
// The semantics follow MongoDB's query language for the operators supported here ($eq $ne $gt $gte $lt $lte
// $in $nin $exists $type $regex $size $all $elemMatch $and $or $nor $not), including dotted paths through
// nested objects and arrays, implicit array traversal, null-or-missing and type bracketing. docs/conditions.md
// lists the few places where a JSON document forces a difference.
package condition

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// CodeBadCondition is the client error code of a condition that does not compile.
const CodeBadCondition = "bad_condition"

// Nesting limits, checked before gjson's (recursive) validation so that no input can exhaust the stack:
// conditions are small, contexts get encoding/json's limit.
const (
	maxDepth        = 100
	maxContextDepth = 10000
)

// Condition is a compiled condition. It is immutable and safe for concurrent use. A nil *Condition matches
// every document.
type Condition struct {
	root node     // nil: matches every document
	top  []string // the top-level fields the condition reads, found in one pass per Match
	text string
}

// CompileError says why a condition does not compile: Operator is the operator at fault (empty for errors of
// the whole condition), Path the place in the condition where it sits, as dotted keys from the top of the
// condition (e.g. "level", "$or.1.dept", "items.$elemMatch.qty"; empty at the top level).
type CompileError struct {
	Path     string
	Operator string
	Message  string
}

func (e *CompileError) Error() string {
	switch {
	case e.Operator != "" && e.Path != "":
		return fmt.Sprintf("condition: %s at %q: %s", e.Operator, e.Path, e.Message)
	case e.Operator != "":
		return fmt.Sprintf("condition: %s: %s", e.Operator, e.Message)
	case e.Path != "":
		return fmt.Sprintf("condition at %q: %s", e.Path, e.Message)
	default:
		return "condition: " + e.Message
	}
}

// DomainError returns the error as a domain error of kind EINVALID and code bad_condition, with the path and
// operator in its details.
func (e *CompileError) DomainError() *model.Error {
	return model.CodedError(model.EINVALID, CodeBadCondition, "%s", e.Error()).
		WithDetails(map[string]any{"path": e.Path, "operator": e.Operator})
}

// Unwrap lets errors.As find a *model.Error in a CompileError, so the HTTP layer maps it to 400 like any
// other invalid input.
func (e *CompileError) Unwrap() error { return e.DomainError() }

// Compile parses a condition (a JSON query object) once; the compiled form is evaluated many times.
// An empty or `null` condition compiles to one that always matches. Errors are *CompileError (kind EINVALID
// through errors.As).
func Compile(raw []byte) (*Condition, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return &Condition{}, nil
	}
	if depthOf(trimmed) > maxDepth {
		return nil, &CompileError{Message: fmt.Sprintf("nested deeper than %d levels", maxDepth)}
	}
	if !gjson.ValidBytes(trimmed) {
		return nil, &CompileError{Message: "malformed JSON"}
	}
	// ParseBytes copies, so the compiled tree does not keep the caller's buffer alive or see it change.
	q := gjson.ParseBytes(trimmed)
	if !q.IsObject() {
		return nil, &CompileError{Message: "a condition must be a JSON object, got " + describeJSON(q)}
	}
	root, err := parseQuery(q, "")
	if err != nil {
		return nil, err
	}
	c := &Condition{}
	if !isAlways(root) {
		c.root = root
		c.top = assignSlots(root, nil)
		c.text = format(root)
	}
	return c, nil
}

// Match evaluates the condition against a JSON document (the instance context). A document that is not a
// JSON object is read as an empty one. Match never panics and does not keep doc.
func (c *Condition) Match(doc []byte) (matched bool) {
	if c == nil || c.root == nil {
		return true
	}
	// The matchers are written not to panic on any input (the fuzz test checks that); this is the last guard
	// so that a bug can only ever turn an edge off, never take the engine down.
	defer func() {
		if recover() != nil {
			matched = false
		}
	}()
	return c.match(doc)
}

// match is Match without the recover, so that tests see panics.
func (c *Condition) match(doc []byte) bool { return c.matchIndexed(doc, true) }

// matchIndexed matches doc, finding the condition's top-level fields in one pass when indexed is true (as
// Match does) or each with gjson.Get (for tests that compare both ways).
func (c *Condition) matchIndexed(doc []byte, indexed bool) bool {
	if c == nil || c.root == nil {
		return true
	}
	// The document is read without copying: nothing read from it outlives this call, and nothing writes
	// to it (gjson.GetBytes does the same).
	text := unsafe.String(unsafe.SliceData(doc), len(doc)) //nolint:gosec // G103: a read-only view of doc kept for this call only (see above)
	root := gjson.Parse(text)
	if kindOf(root) != kindObject {
		return matchDoc(c.root, gjson.Result{}, nil) // read as an empty document
	}
	if !indexed {
		return matchDoc(c.root, root, nil)
	}
	var top topFields
	scanTop(doc, text, c.top, top.vals[:len(c.top)])
	return matchDoc(c.root, root, &top)
}

// Evaluate compiles condition and matches it against doc (used by POST /conditions/evaluate). An empty or
// null doc is an empty document; a doc that is not a JSON object is an EINVALID error.
func Evaluate(condition, doc []byte) (bool, error) {
	c, err := Compile(condition)
	if err != nil {
		return false, err
	}
	d := bytes.TrimSpace(doc)
	if len(d) == 0 || string(d) == "null" {
		d = []byte("{}")
	}
	if depthOf(d) > maxContextDepth {
		return false, model.Errorf(model.EINVALID, "condition: the context is nested deeper than %d levels", maxContextDepth)
	}
	if !gjson.ValidBytes(d) {
		return false, model.Errorf(model.EINVALID, "condition: the context is not valid JSON")
	}
	if r := gjson.ParseBytes(d); !r.IsObject() {
		return false, model.Errorf(model.EINVALID, "condition: the context must be a JSON object, got %s", describeJSON(r))
	}
	return c.Match(d), nil
}

// String returns a short human text of the condition, e.g. `level >= 3 and dept in [a,b]`, used as the
// label of an edge. It is empty for a condition that always matches.
func (c *Condition) String() string {
	if c == nil {
		return ""
	}
	return c.text
}

// Always reports whether the condition matches every document (it was empty, null or {}).
func (c *Condition) Always() bool { return c == nil || c.root == nil }

// depthOf returns the deepest nesting of objects and arrays in a JSON text (any bytes will do).
func depthOf(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, ch := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
		case ch == '"':
			inString = true
		case ch == '{' || ch == '[':
			depth++
			deepest = max(deepest, depth)
		case ch == '}' || ch == ']':
			depth--
		}
	}
	return deepest
}

// describeJSON names the JSON type of r for error messages.
func describeJSON(r gjson.Result) string {
	switch kindOf(r) {
	case kindMissing:
		return "nothing"
	case kindNull:
		return "null"
	case kindBool:
		return "a boolean"
	case kindNumber:
		return "a number"
	case kindString:
		return "a string"
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}
