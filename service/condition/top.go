package condition

import (
	"github.com/tidwall/gjson"
)

// maxTopFields is how many distinct top-level fields a condition looks up in one pass over the document;
// clauses on further fields find theirs with gjson.Get.
const maxTopFields = 16

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

// scanTop fills out[i] with the value of the first top-level field of obj named names[i], skipping over
// the other values without decoding them. It stops early once every name is found, and at the first
// malformed byte (the fields not found by then are missing, as gjson would read them at best).
func scanTop(obj string, names []string, out []gjson.Result) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	remaining := len(names)
	for remaining > 0 {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return // the end of the object, or malformed
		}
		keyStart := i
		end, escaped, ok := skipString(obj, i)
		if !ok {
			return
		}
		key := obj[keyStart+1 : end-1]
		if escaped {
			key = gjson.Parse(obj[keyStart:end]).Str
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		valStart := i
		if i = skipValue(obj, i); i == valStart {
			return
		}
		for j, name := range names {
			if name == key {
				if !out[j].Exists() {
					out[j] = gjson.Parse(obj[valStart:i])
					remaining--
				}
				break
			}
		}
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// Byte classes for skipping JSON without decoding it (read-only tables).
var (
	inStringStop  = [256]bool{'"': true, '\\': true}
	containerStop = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}
)

// skipString returns the index after the string that starts at s[i] (a quote), whether it holds escapes,
// and false when it is not terminated.
func skipString(s string, i int) (end int, escaped, ok bool) {
	for i++; i < len(s); i++ {
		for i < len(s) && !inStringStop[s[i]] {
			i++
		}
		if i >= len(s) {
			break
		}
		if s[i] == '"' {
			return i + 1, escaped, true
		}
		escaped = true
		i++ // the escaped byte
	}
	return len(s), escaped, false
}

// skipValue returns the index after the JSON value that starts at s[i].
func skipValue(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '"':
		end, _, _ := skipString(s, i)
		return end
	case '{', '[':
		depth := 0
		for i < len(s) {
			for i < len(s) && !containerStop[s[i]] {
				i++
			}
			if i >= len(s) {
				break
			}
			switch s[i] {
			case '"':
				i, _, _ = skipString(s, i)
				continue
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
	for i < len(s) && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
		s[i] != '\n' && s[i] != '\r' {
		i++
	}
	return i
}
