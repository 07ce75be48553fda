package condition

import (
	"encoding/binary"
	"math/bits"

	"github.com/tidwall/gjson"
)

// maxTopFields is how many distinct top-level fields a condition looks up in one pass over the document;
// clauses on further fields find theirs with gjson.Get.
const maxTopFields = 8

// topFields holds the values of a condition's top-level fields in one document (missing ones are zero).
// Every clause of a condition starts at the top of the same document, and gjson.Get scans from the start
// each time; reading the top level once instead keeps Match at one pass however many clauses there are.
type topFields struct {
	vals [maxTopFields]gjson.Result
}

// assignSlots gives each document-level leaf of n the index of its first path part in names, adding
// names as needed, and returns names. Leaves inside $elemMatch match array elements, not the document,
// and keep slot -1.
func assignSlots(n node, names []string) []string {
	switch n := n.(type) {
	case *leaf:
		first := n.parts[0].name
		for i, name := range names {
			if name == first {
				n.slot = i
				return names
			}
		}
		if len(names) < maxTopFields {
			n.slot = len(names)
			names = append(names, first)
		}
	case *not:
		names = assignSlots(n.child, names)
	case *and:
		for _, k := range n.kids {
			names = assignSlots(k, names)
		}
	case *or:
		for _, k := range n.kids {
			names = assignSlots(k, names)
		}
	case *allOf:
		for _, k := range n.kids {
			names = assignSlots(k, names)
		}
	}
	return names
}

// scanTop fills out[i] with the value of the first top-level field named names[i] in the JSON object doc,
// skipping over the other values without decoding them. text is doc as a string (the same bytes); the
// values read point into it. It stops early once every name is found, and at the first malformed byte (the
// fields not found by then are missing, as gjson would read them at best).
func scanTop(doc []byte, text string, names []string, out []gjson.Result) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return
	}
	i++
	remaining := len(names)
	for remaining > 0 {
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != '"' {
			return // the end of the object, or malformed
		}
		keyStart := i
		end, escaped, ok := skipString(doc, i)
		if !ok {
			return
		}
		key := text[keyStart+1 : end-1]
		if escaped {
			key = gjson.Parse(text[keyStart:end]).Str
		}
		i = skipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return
		}
		i = skipSpace(doc, i+1)
		valStart := i
		if i = skipValue(doc, i); i == valStart {
			return
		}
		for j, name := range names {
			if name == key {
				if !out[j].Exists() {
					out[j] = gjson.Parse(text[valStart:i])
					remaining--
				}
				break
			}
		}
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(s []byte, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// SWAR constants: a byte of ones in every lane, and the high bit of every lane.
const (
	lanes1    = 0x0101010101010101
	lanesHigh = 0x8080808080808080
)

// skipPlain returns the first index at or after i where a '"' or '\\' may be: the first one in the
// eight-byte blocks from i, or where fewer than eight bytes remain. Strings are most of a JSON text; testing
// eight bytes per step (the has-zero-byte trick, exact for the lowest match) skips them several times
// faster than a byte loop. It is small enough to be inlined.
func skipPlain(s []byte, i int) int {
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		q, b := w^('"'*lanes1), w^('\\'*lanes1)
		if m := ((q-lanes1)&^q | (b-lanes1)&^b) & lanesHigh; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return i
}

// skipString returns the index after the string that starts at s[i] (a quote), whether it holds escapes,
// and false when it is not terminated.
func skipString(s []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(s); i++ {
		if i = skipPlain(s, i); i >= len(s) {
			break
		}
		switch s[i] {
		case '"':
			return i + 1, escaped, true
		case '\\':
			escaped = true
			i++ // the escaped byte
		}
	}
	return len(s), escaped, false
}

// skipValue returns the index after the JSON value that starts at s[i].
func skipValue(s []byte, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		end, _, _ := skipString(s, i)
		return end
	case '{', '[':
		return skipContainer(s, i)
	}
	for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
		s[i] != '\n' && s[i] != '\r' {
		i++
	}
	return i
}

// skipContainer returns the index after the object or array that starts at s[i]. Strings are skipped in
// line: a call per string costs more than most strings.
func skipContainer(s []byte, i int) int {
	depth := 0
	for i < len(s) {
		switch s[i] {
		case '"':
			for i++; i < len(s); i++ {
				if i = skipPlain(s, i); i >= len(s) || s[i] == '"' {
					break
				}
				if s[i] == '\\' {
					i++ // the escaped byte
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
		i++
	}
	return len(s)
}
