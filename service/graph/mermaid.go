package graph

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
)

// maxEdgeLabel is how many characters of a condition an edge label shows by default.
const maxEdgeLabel = 60

// Mermaid renders d as Mermaid flowchart source (seed 003: "we can use mermaid to visualise it").
//
// Every node gets a generated id (n0, n1... in definition order) so that node ids like "end", "graph" or "a-b"
// cannot break the syntax, a shape per node type and its name (or id) as a quoted label; every text is escaped
// with Mermaid entity codes. Edges are labelled with their condition: edgeLabel's text, or, when edgeLabel is nil,
// the compact JSON of the condition cut to about 60 characters; default edges read "default". Timeout and catch
// branches are drawn as dotted arrows.
//
// The words of these labels ("default", "on timeout", "timeout", "on error", and " · pruned" / " · killed" of
// MermaidInstance) are the same for every client of the API; MermaidIn writes them in a reader's language, and the
// web UI puts its reader's language on exactly these when a diagram comes without one
// (frontend/src/lib/diagram.ts localizeDiagram): change them in all places together.
//
// With states non-nil (node id → "active", "waiting", "completed", "rejected", "skipped", "failed" or
// "cancelled") every node is given its state as a class, for an instance diagram.
func Mermaid(d *model.Definition, states map[string]model.NodeState, edgeLabel func(model.Edge) string) string {
	return MermaidInstance(d, states, nil, "", edgeLabel, nil)
}

// Edge states an instance diagram draws (EdgeStyles): taken edges solid green, pruned ones (routing did not
// choose them) grey and dashed, killed ones (a rejection or failure upstream) red and dotted.
const (
	EdgeTaken  = "taken"
	EdgePruned = "pruned"
	EdgeKilled = "killed"
)

// ErrorNodeStyle marks the node whose error failed an instance.
const ErrorNodeStyle = "stroke:#a40e26,stroke-width:4px"

// EdgeStyles are the Mermaid link styles of the edge states.
var EdgeStyles = map[string]string{
	EdgeTaken:  "stroke:#16a34a,stroke-width:2px",
	EdgePruned: "stroke:#9ca3af,stroke-width:1px,stroke-dasharray:6 4",
	EdgeKilled: "stroke:#dc2626,stroke-width:2px,stroke-dasharray:2 3",
}

// MermaidInstance is Mermaid with the state of each edge of d (index-aligned with d.Edges: EdgeTaken,
// EdgePruned, EdgeKilled or "" for undecided) drawn as a link style, and pruned and killed edges labelled so that
// the difference reads without colour too. failed, when not "", is the node whose error failed the instance: it is
// drawn with a heavy red border (ErrorNodeStyle).
//
// notes adds a line to the label of a node (by id): the states of a subprocess node's children.
func MermaidInstance(d *model.Definition, states map[string]model.NodeState, edgeStates []string, failed string, edgeLabel func(model.Edge) string,
	notes map[string]string) string {
	return MermaidIn("", d, states, edgeStates, failed, edgeLabel, notes)
}

// edgeWords are the words of the edge labels per language; "" is the API's default (English, as the web UI
// expects to find them: frontend/src/lib/diagram.ts, whose words for zh-CN and en these are too).
var edgeWords = map[string]map[string]string{
	model.LangZhCN: {"default": "默认", "on timeout": "超时时", "timeout": "超时", "on error": "出错时", EdgePruned: "未选中", EdgeKilled: "已中止"},
	model.LangEN:   {"default": "default", "on timeout": "on timeout", "timeout": "timeout", "on error": "on error", EdgePruned: "pruned", EdgeKilled: "killed"},
}

// MermaidIn is MermaidInstance in a reader's language (model.LangZhCN or model.LangEN; "" for the plain names and
// the English words of Mermaid): each node is named by its name in lang (its i18n label, else its plain name,
// else its id) and the words of the edge labels ("default", "on timeout", "pruned"…) are lang's. Conditions are
// whatever edgeLabel says (the caller renders them in lang: condition.Readable).
func MermaidIn(lang string, d *model.Definition, states map[string]model.NodeState, edgeStates []string, failed string, edgeLabel func(model.Edge) string,
	notes map[string]string) string {
	return MermaidCalling(lang, d, states, edgeStates, failed, edgeLabel, notes, nil)
}

// MermaidCalling is MermaidIn with the name of the process each subprocess node calls: callee (when not nil)
// returns it for a node (its template in lang, say); "" or a nil callee draws the called template's key.
func MermaidCalling(lang string, d *model.Definition, states map[string]model.NodeState, edgeStates []string, failed string,
	edgeLabel func(model.Edge) string, notes map[string]string, callee func(n *model.Node) string) string {
	word := func(w string) string {
		if t, ok := edgeWords[lang][w]; ok {
			return t
		}
		return w
	}
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	if d == nil {
		return b.String()
	}
	b.Grow(64 * (len(d.Nodes) + len(d.Edges) + 8))
	ids := make(map[string]string, len(d.Nodes)) // node id → generated id, the first node wins
	gen := make([]string, len(d.Nodes))
	for i := range d.Nodes {
		n := &d.Nodes[i]
		gen[i] = "n" + strconv.Itoa(i)
		if _, dup := ids[n.ID]; !dup {
			ids[n.ID] = gen[i]
		}
		text := n.I18n.Name(lang)
		if text == "" {
			text = n.Label()
		}
		if text == "" {
			text = n.Type
		}
		if n.Type == model.NodeSubprocess && n.Template != "" {
			called := n.Template // the process it calls
			if callee != nil {
				if name := callee(n); name != "" {
					called = name
				}
			}
			text += " ↳ " + called
			if n.ForEach != "" {
				text += " ×" + n.ForEach
			}
		}
		if note := notes[n.ID]; note != "" {
			text += " · " + note
		}
		open, close := shape(n.Type)
		b.WriteString("    ")
		b.WriteString(gen[i])
		b.WriteString(open)
		b.WriteByte('"')
		b.WriteString(escapeMermaid(text))
		b.WriteByte('"')
		b.WriteString(close)
		b.WriteByte('\n')
	}
	links := 0
	linkOf := map[string][]string{} // edge state → link indexes
	link := func(from, to, arrow, text string) {
		links++
		b.WriteString("    ")
		b.WriteString(from)
		b.WriteString(" ")
		b.WriteString(arrow)
		if text != "" {
			b.WriteString(`|"`)
			b.WriteString(escapeMermaid(text))
			b.WriteString(`"|`)
		}
		b.WriteString(" ")
		b.WriteString(to)
		b.WriteByte('\n')
	}
	for i, e := range d.Edges {
		from, okFrom := ids[e.From]
		to, okTo := ids[e.To]
		if !okFrom || !okTo {
			continue // an invalid draft: draw what exists
		}
		var text string
		switch {
		case e.Default:
			text = word("default")
		case !e.HasCondition():
		case edgeLabel != nil:
			text = edgeLabel(e)
		default:
			text = conditionLabel(e.Condition)
		}
		st := ""
		if i < len(edgeStates) {
			st = edgeStates[i]
		}
		switch st {
		case EdgePruned, EdgeKilled:
			if text != "" {
				text += " · "
			}
			text += word(st)
		}
		if st != "" {
			linkOf[st] = append(linkOf[st], strconv.Itoa(links))
		}
		link(from, to, "-->", text)
	}
	for i := range d.Nodes {
		n := &d.Nodes[i]
		branches := []struct{ target, text string }{
			{n.OnTimeout.Branch, word("on timeout")},
			{n.TimeoutBranch, word("timeout")},
		}
		if n.ErrorHandler.Op() == model.ErrorOpCatch {
			branches = append(branches, struct{ target, text string }{n.ErrorHandler.Catch.Branch, word("on error")})
		}
		for _, br := range branches {
			if to, ok := ids[br.target]; ok && br.target != "" {
				link(gen[i], to, "-.->", br.text)
			}
		}
	}
	if states != nil {
		writeStates(&b, d, gen, states)
	}
	if g, ok := ids[failed]; ok && failed != "" {
		b.WriteString("    style ")
		b.WriteString(g)
		b.WriteByte(' ')
		b.WriteString(ErrorNodeStyle)
		b.WriteByte('\n')
	}
	for _, st := range []string{EdgeTaken, EdgePruned, EdgeKilled} {
		if l := linkOf[st]; len(l) > 0 {
			b.WriteString("    linkStyle ")
			b.WriteString(strings.Join(l, ","))
			b.WriteByte(' ')
			b.WriteString(EdgeStyles[st])
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// shape returns the brackets that give a node type its shape.
func shape(nodeType string) (open, close string) {
	switch nodeType {
	case model.NodeStart:
		return "([", "])" // stadium
	case model.NodeApproval:
		return "[", "]" // rectangle
	case model.NodeAuto, model.NodeSubprocess:
		return "[[", "]]" // subroutine
	case model.NodeDelay:
		return "{{", "}}" // hexagon
	case model.NodeCallback:
		return "[/", "/]" // parallelogram
	case model.NodeError:
		return ">", "]" // asymmetric flag
	case model.NodeEnd:
		return "(((", ")))" // double circle
	case model.NodeTerminate:
		return `[\`, `/]` // inverted trapezoid
	}
	return "(", ")" // rounded rectangle for anything unknown
}

func writeStates(b *strings.Builder, d *model.Definition, gen []string, states map[string]model.NodeState) {
	classes := []struct {
		state model.NodeState
		style string
	}{
		{model.NodeActive, "fill:#dbeafe,stroke:#2563eb,stroke-width:2px"},
		{model.NodeWaiting, "fill:#fef9c3,stroke:#ca8a04,stroke-width:2px"},
		{model.NodeCompleted, "fill:#dcfce7,stroke:#16a34a"},
		{model.NodeRejected, "fill:#fee2e2,stroke:#dc2626"},
		{model.NodeSkipped, "fill:#f3f4f6,stroke:#9ca3af,color:#6b7280,stroke-dasharray: 4 3"},
		{model.NodeFailed, "fill:#fecaca,stroke:#b91c1c,stroke-width:2px"},
		{model.NodeCancelled, "fill:#e5e7eb,stroke:#6b7280,color:#6b7280"},
	}
	members := make(map[model.NodeState][]string, len(classes))
	seen := make(map[string]bool, len(d.Nodes))
	for i := range d.Nodes {
		id := d.Nodes[i].ID
		if seen[id] {
			continue // a duplicate id: its state belongs to the first node
		}
		seen[id] = true
		if s, ok := states[id]; ok {
			members[s] = append(members[s], gen[i])
		}
	}
	for _, c := range classes {
		b.WriteString("    classDef ")
		b.WriteString(string(c.state))
		b.WriteByte(' ')
		b.WriteString(c.style)
		b.WriteByte('\n')
	}
	for _, c := range classes { // unknown states are left unstyled
		if m := members[c.state]; len(m) > 0 {
			b.WriteString("    class ")
			b.WriteString(strings.Join(m, ","))
			b.WriteByte(' ')
			b.WriteString(string(c.state))
			b.WriteByte('\n')
		}
	}
}

// CutLabel cuts an edge label to about 60 characters, ending it with "…".
func CutLabel(text string) string {
	if utf8.RuneCountInString(text) <= maxEdgeLabel {
		return text
	}
	r := []rune(text)
	return string(r[:maxEdgeLabel-1]) + "…"
}

// conditionLabel is the default text of a conditional edge: its compact JSON, cut to maxEdgeLabel characters.
func conditionLabel(cond json.RawMessage) string {
	var buf bytes.Buffer
	text := string(bytes.TrimSpace(cond))
	if err := json.Compact(&buf, cond); err == nil {
		text = buf.String()
	}
	return CutLabel(text)
}

// escapeMermaid makes text safe inside a double-quoted Mermaid label: the quote and every character Mermaid
// gives a meaning to become entity codes (#quot; or #<decimal>;), and newlines become <br>.
func escapeMermaid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString("#quot;")
		case '#': // starts an entity code
			b.WriteString("#35;")
		case '%': // %%{...}%% is a directive
			b.WriteString("#37;")
		case '&':
			b.WriteString("#amp;")
		case '<':
			b.WriteString("#lt;")
		case '>':
			b.WriteString("#gt;")
		case '|': // closes an edge label
			b.WriteString("#124;")
		case '`': // starts a markdown string
			b.WriteString("#96;")
		case '\n':
			b.WriteString("<br>")
		case '\r':
		default:
			if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				b.WriteByte(' ')
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}
