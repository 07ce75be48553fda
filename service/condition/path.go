package condition

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// pathPart is one component of a dotted path.
type pathPart struct {
	name  string // the field name
	key   string // name escaped for gjson.Get
	index int    // the array index the name spells ("0", "12"; not "01"), or -1
}

func splitPath(path string) []pathPart {
	names := strings.Split(path, ".")
	parts := make([]pathPart, len(names))
	for i, n := range names {
		parts[i] = pathPart{name: n, key: gjson.Escape(n), index: arrayIndex(n)}
	}
	return parts
}

// arrayIndex returns the array index that s names, as the field names of a BSON array spell them, or -1.
func arrayIndex(s string) int {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// predicate tests one value reached by a path; the value is missing (kindOf == kindMissing) when the path
// leads nowhere.
type predicate interface {
	test(v gjson.Result) bool
}

// field returns the value of part in cur: a field of an object or, when cur is an array being matched as a
// document (inside $elemMatch), the element at that index.
func field(cur gjson.Result, part *pathPart) gjson.Result {
	switch kindOf(cur) {
	case kindObject:
		if part.key == "" {
			return emptyKeyField(cur)
		}
		return cur.Get(part.key)
	case kindArray:
		if part.index < 0 {
			return gjson.Result{}
		}
		var found gjson.Result
		i := 0
		cur.ForEach(func(_, v gjson.Result) bool {
			if i == part.index {
				found = v
				return false
			}
			i++
			return true
		})
		return found
	}
	return gjson.Result{}
}

// emptyKeyField finds the field named "" (gjson.Get cannot name it).
func emptyKeyField(obj gjson.Result) gjson.Result {
	var found gjson.Result
	obj.ForEach(func(k, v gjson.Result) bool {
		if k.Str == "" {
			found = v
			return false
		}
		return true
	})
	return found
}

// walk reports whether p holds for any value the path reaches in doc. It yields the values MongoDB's
// BSONElementIterator yields: it follows objects; at an array it looks into every element that is an object
// (and at the element an array index names); a path that ends at an array yields each element and then the
// array itself (only the array when traverseLeaf is false, for $size and $elemMatch); a path that stops at
// a scalar or a missing field yields "missing" once.
func walk(cur gjson.Result, parts []pathPart, traverseLeaf bool, p predicate) bool {
	return walkFrom(field(cur, &parts[0]), parts, traverseLeaf, p)
}

// walkFrom is walk given v, the value of the path's first part.
func walkFrom(v gjson.Result, parts []pathPart, traverseLeaf bool, p predicate) bool {
	for i := 0; ; i++ {
		last := i == len(parts)-1
		switch kindOf(v) {
		case kindObject:
			if last {
				return p.test(v)
			}
			v = field(v, &parts[i+1])
		case kindArray:
			return walkArray(v, parts[i+1:], traverseLeaf, p)
		case kindMissing:
			return p.test(gjson.Result{})
		default:
			if !last {
				return p.test(gjson.Result{})
			}
			return p.test(v)
		}
	}
}

// walkArray continues walk at an array with the rest of the path.
func walkArray(arr gjson.Result, rest []pathPart, traverseLeaf bool, p predicate) bool {
	if len(rest) == 0 {
		if traverseLeaf && anyElem(arr, p) {
			return true
		}
		return p.test(arr)
	}
	next := &rest[0]
	k, found := 0, false
	arr.ForEach(func(_, e gjson.Result) bool {
		offset := next.index == k
		k++
		switch kindOf(e) {
		case kindObject:
			// An object element is looked into with the whole rest of the path...
			if walk(e, rest, traverseLeaf, p) {
				found = true
			} else if offset {
				// ...and, when the path names its index, also as the element itself.
				if len(rest) == 1 {
					found = p.test(e)
				} else {
					found = walk(e, rest[1:], traverseLeaf, p)
				}
			}
		case kindArray:
			if offset {
				if len(rest) == 1 {
					found = p.test(e)
				} else {
					found = walkArray(e, rest[1:], traverseLeaf, p)
				}
			}
		default:
			if offset && len(rest) == 1 {
				found = p.test(e)
			}
		}
		return !found
	})
	return found
}

// anyElem reports whether p holds for an element of arr.
func anyElem(arr gjson.Result, p predicate) bool {
	found := false
	arr.ForEach(func(_, e gjson.Result) bool {
		found = p.test(e)
		return !found
	})
	return found
}
