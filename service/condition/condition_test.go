package condition_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/condition"
)

type matchCase struct {
	name string
	cond string
	doc  string
	want bool
}

func runMatchCases(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := condition.Compile([]byte(tc.cond))
			if err != nil {
				t.Fatalf("Compile(%s): %v", tc.cond, err)
			}
			if got := condition.MatchStrict(c, []byte(tc.doc)); got != tc.want {
				t.Errorf("Match(%s) on %s = %v, want %v", tc.cond, tc.doc, got, tc.want)
			}
			if got := c.Match([]byte(tc.doc)); got != tc.want {
				t.Errorf("Match (with recover) disagrees: %v", got)
			}
			if got := condition.MatchWithoutIndex(c, []byte(tc.doc)); got != tc.want {
				t.Errorf("Match without the top-level index disagrees: %v", got)
			}
		})
	}
}

// semanticCases pin down MongoDB's rules case by case: the rule each group checks is in its comment.
var semanticCases = []matchCase{
	// Empty conditions match everything.
	{"empty object", `{}`, `{"a":1}`, true},
	{"empty text", ``, `{"a":1}`, true},
	{"null", `null`, `{}`, true},
	{"comment only", `{"$comment":"always"}`, `{}`, true},

	// Implicit $eq and implicit $and (the query-documents tutorial).
	{"implicit eq", `{"a":5}`, `{"a":5}`, true},
	{"implicit eq other", `{"a":5}`, `{"a":6}`, false},
	{"implicit and both", `{"a":5,"b":"x"}`, `{"a":5,"b":"x"}`, true},
	{"implicit and one", `{"a":5,"b":"x"}`, `{"a":5,"b":"y"}`, false},
	{"several operators on one field", `{"a":{"$gt":1,"$lt":3}}`, `{"a":2}`, true},
	{"several operators on one field fail", `{"a":{"$gt":1,"$lt":3}}`, `{"a":3}`, false},
	{"duplicate field is a conjunction", `{"a":{"$gt":1},"a":{"$lt":3}}`, `{"a":5}`, false},

	// Numbers compare across int and float; strings in binary order; never across types.
	{"int equals float", `{"a":1}`, `{"a":1.0}`, true},
	{"float equals int", `{"a":1.0}`, `{"a":1}`, true},
	{"exponent", `{"a":100}`, `{"a":1e2}`, true},
	{"float gt int", `{"a":{"$gt":1}}`, `{"a":1.5}`, true},
	{"big ints exact", `{"a":{"$gt":9007199254740992}}`, `{"a":9007199254740993}`, true},
	{"big ints equal", `{"a":9007199254740993}`, `{"a":9007199254740992}`, false},
	{"int vs float near 2^63", `{"a":{"$lt":9223372036854775807}}`, `{"a":9.3e18}`, false},
	{"negative", `{"a":{"$lt":-1}}`, `{"a":-1.5}`, true},
	{"number not gt string", `{"a":{"$gt":1}}`, `{"a":"5"}`, false},
	{"string not gt number", `{"a":{"$gt":"1"}}`, `{"a":5}`, false},
	{"number not eq string", `{"a":5}`, `{"a":"5"}`, false},
	{"string binary order", `{"a":{"$lt":"a"}}`, `{"a":"Z"}`, true},
	{"string prefix smaller", `{"a":{"$lt":"ab"}}`, `{"a":"a"}`, true},
	{"string unicode escapes", `{"a":"é"}`, `{"a":"\u00e9"}`, true},
	{"bool eq", `{"a":true}`, `{"a":true}`, true},
	{"bool not eq number", `{"a":true}`, `{"a":1}`, false},
	{"bool order", `{"a":{"$gt":false}}`, `{"a":true}`, true},
	{"null not gt", `{"a":{"$gt":null}}`, `{"a":null}`, false},
	{"null gte null", `{"a":{"$gte":null}}`, `{"a":null}`, true},
	{"missing lte null", `{"a":{"$lte":null}}`, `{}`, true},
	{"missing not lt null", `{"a":{"$lt":null}}`, `{}`, false},
	{"missing not gt number", `{"a":{"$gt":0}}`, `{}`, false},
	{"missing not lt number", `{"a":{"$lt":0}}`, `{}`, false},

	// Objects compare field by field, in order; numbers inside them across int/float.
	{"object eq", `{"a":{"x":1,"y":2}}`, `{"a":{"x":1,"y":2}}`, true},
	{"object eq order matters", `{"a":{"x":1,"y":2}}`, `{"a":{"y":2,"x":1}}`, false},
	{"object eq extra field", `{"a":{"x":1}}`, `{"a":{"x":1,"y":2}}`, false},
	{"object eq float", `{"a":{"x":1}}`, `{"a":{"x":1.0}}`, true},
	{"object eq nested", `{"a":{"x":{"y":[1,2]}}}`, `{"a":{"x":{"y":[1,2]}}}`, true},
	{"object gt by value", `{"a":{"$gt":{"x":1}}}`, `{"a":{"x":2}}`, true},
	{"object gt by longer", `{"a":{"$gt":{"x":1}}}`, `{"a":{"x":1,"y":0}}`, true},
	{"object lt by name", `{"a":{"$lt":{"y":1}}}`, `{"a":{"x":5}}`, true},
	{"object lt by type", `{"a":{"$lt":{"x":"s"}}}`, `{"a":{"x":5}}`, true},
	{"empty object eq", `{"a":{}}`, `{"a":{}}`, true},
	{"empty object not eq", `{"a":{}}`, `{"a":{"b":1}}`, false},

	// Dotted paths into objects and through arrays.
	{"dotted", `{"a.b.c":1}`, `{"a":{"b":{"c":1}}}`, true},
	{"dotted missing", `{"a.b.c":1}`, `{"a":{"b":1}}`, false},
	{"dotted through scalar is missing", `{"a.b":null}`, `{"a":5}`, true},
	{"index", `{"a.1":"y"}`, `{"a":["x","y"]}`, true},
	{"index out of range is missing", `{"a.5":{"$exists":true}}`, `{"a":["x","y"]}`, false},
	{"index then field", `{"a.0.b":1}`, `{"a":[{"b":1},{"b":2}]}`, true},
	{"index then field other", `{"a.1.b":1}`, `{"a":[{"b":1},{"b":2}]}`, false},
	{"traverse array of objects", `{"a.b":2}`, `{"a":[{"b":1},{"b":2}]}`, true},
	{"traverse to leaf arrays", `{"a.b":3}`, `{"a":[{"b":[1,2]},{"b":[3]}]}`, true},
	{"traverse two levels", `{"a.b.c":3}`, `{"a":[{"b":[{"c":1},{"c":3}]}]}`, true},
	{"nested arrays are not traversed", `{"a.b":1}`, `{"a":[[{"b":1}]]}`, false},
	{"index into nested array", `{"a.0.b":1}`, `{"a":[[{"b":1}]]}`, true},
	{"index into nested array value", `{"a.0.1":2}`, `{"a":[[1,2]]}`, true},
	{"numeric field of object in array", `{"a.0":5}`, `{"a":[{"0":5}]}`, true},
	{"numeric field of object", `{"a.0":5}`, `{"a":{"0":5}}`, true},
	{"leading zero is not an index", `{"a.01":"y"}`, `{"a":["x","y"]}`, false},
	{"key with spaces and symbols", `{"a b.c*d":1}`, `{"a b":{"c*d":1}}`, true},
	{"key like gjson syntax", `{"#.@this":1}`, `{"#":{"@this":1}}`, true},
	{"empty key", `{"":1}`, `{"":1}`, true},
	{"empty key component", `{"a..b":1}`, `{"a":{"":{"b":1}}}`, true},
	{"escaped key", `{"ab":1}`, `{"a\u0062":1}`, true},
	{"first of duplicate keys", `{"a":1}`, `{"a":1,"a":2}`, true},
	{"not the second of duplicate keys", `{"a":2}`, `{"a":1,"a":2}`, false},
	{"strings with brackets and escapes before the field", `{"b":2}`, `{"x":["]}\"","\\",{"y":"{["}],"b":2}`, true},
	{"escaped key before the field", `{"b":2}`, `{"a\"b":1,"b":2}`, true},
	{"escaped key is the field", `{"a\"b":1}`, `{"x":0,"a\"b":1}`, true},
	{"spaces around the field", `{"b":2}`, " {\n \"a\" : [ 1 , {} ] ,\t\"b\"\r: 2 } ", true},
	{"more than 16 top-level fields", `{"f1":1,"f2":2,"f3":3,"f4":4,"f5":5,"f6":6,"f7":7,"f8":8,"f9":9,"f10":10,"f11":11,"f12":12,"f13":13,"f14":14,"f15":15,"f16":16,"f17":17,"f18":18}`,
		`{"f18":18,"f17":17,"f16":16,"f15":15,"f14":14,"f13":13,"f12":12,"f11":11,"f10":10,"f9":9,"f8":8,"f7":7,"f6":6,"f5":5,"f4":4,"f3":3,"f2":2,"f1":1}`, true},

	// An array field matches when an element matches, or the array as a whole ($eq with an array value).
	{"element eq", `{"a":2}`, `{"a":[1,2,3]}`, true},
	{"element eq none", `{"a":4}`, `{"a":[1,2,3]}`, false},
	{"whole array eq", `{"a":[1,2,3]}`, `{"a":[1,2,3]}`, true},
	{"whole array order", `{"a":[1,2,3]}`, `{"a":[3,2,1]}`, false},
	{"nested array element eq", `{"a":[1,2]}`, `{"a":[[1,2],3]}`, true},
	{"nested array not flattened", `{"a":1}`, `{"a":[[1,2]]}`, false},
	{"empty array eq", `{"a":[]}`, `{"a":[]}`, true},
	{"empty array in array", `{"a":[]}`, `{"a":[[],1]}`, true},
	{"element gt", `{"a":{"$gt":2}}`, `{"a":[1,3]}`, true},
	{"array gt array", `{"a":{"$gt":[1,2]}}`, `{"a":[1,3]}`, true},
	{"array lt longer", `{"a":{"$lt":[1,2]}}`, `{"a":[1]}`, true},
	{"ne holds when no element matches", `{"a":{"$ne":4}}`, `{"a":[1,2,3]}`, true},
	{"ne fails when an element matches", `{"a":{"$ne":2}}`, `{"a":[1,2,3]}`, false},
	{"nin holds when no element matches", `{"a":{"$nin":[4,5]}}`, `{"a":[1,2,3]}`, true},
	{"nin fails when an element matches", `{"a":{"$nin":[3,5]}}`, `{"a":[1,2,3]}`, false},
	{"in element", `{"a":{"$in":[3,5]}}`, `{"a":[1,2,3]}`, true},
	{"in whole array", `{"a":{"$in":[[1,2]]}}`, `{"a":[1,2]}`, true},
	{"in object", `{"a":{"$in":[{"b":1}]}}`, `{"a":[{"b":1}]}`, true},
	{"in regex", `{"a":{"$in":["x",{"$regex":"^b","$options":"i"}]}}`, `{"a":"Bob"}`, true},
	{"in regex not number", `{"a":{"$in":[{"$regex":"1"}]}}`, `{"a":1}`, false},

	// Null and missing.
	{"null matches missing", `{"a":null}`, `{}`, true},
	{"null matches null", `{"a":null}`, `{"a":null}`, true},
	{"null not value", `{"a":null}`, `{"a":0}`, false},
	{"null in array", `{"a":null}`, `{"a":[1,null]}`, true},
	{"ne null missing", `{"a":{"$ne":null}}`, `{}`, false},
	{"eq missing value", `{"a":1}`, `{}`, false},
	{"ne missing value", `{"a":{"$ne":1}}`, `{}`, true},

	// $exists.
	{"exists true", `{"a":{"$exists":true}}`, `{"a":null}`, true},
	{"exists true missing", `{"a":{"$exists":true}}`, `{}`, false},
	{"exists false", `{"a":{"$exists":false}}`, `{}`, true},
	{"exists empty array", `{"a":{"$exists":true}}`, `{"a":[]}`, true},
	{"exists dotted through array", `{"a.b":{"$exists":true}}`, `{"a":[{"c":1},{"b":0}]}`, true},
	{"exists dotted through scalars", `{"a.b":{"$exists":true}}`, `{"a":[1,2]}`, false},
	{"exists index", `{"a.0":{"$exists":true}}`, `{"a":[0]}`, true},
	{"exists index empty", `{"a.0":{"$exists":true}}`, `{"a":[]}`, false},

	// $type, where an integral JSON number is an int and a long, any other a double.
	{"type int", `{"a":{"$type":"int"}}`, `{"a":5}`, true},
	{"type long", `{"a":{"$type":"long"}}`, `{"a":5}`, true},
	{"type integral float is int", `{"a":{"$type":"int"}}`, `{"a":5.0}`, true},
	{"type int not double", `{"a":{"$type":"double"}}`, `{"a":5}`, false},
	{"type double", `{"a":{"$type":"double"}}`, `{"a":5.5}`, true},
	{"type huge is double", `{"a":{"$type":"double"}}`, `{"a":1e300}`, true},
	{"type number", `{"a":{"$type":"number"}}`, `{"a":-0.5}`, true},
	{"type number not string", `{"a":{"$type":"number"}}`, `{"a":"5"}`, false},
	{"type bool", `{"a":{"$type":"bool"}}`, `{"a":false}`, true},
	{"type code 8", `{"a":{"$type":8}}`, `{"a":true}`, true},
	{"type object", `{"a":{"$type":"object"}}`, `{"a":{}}`, true},
	{"type object code", `{"a":{"$type":3}}`, `{"a":{"b":1}}`, true},
	{"type null", `{"a":{"$type":"null"}}`, `{"a":null}`, true},
	{"type null missing", `{"a":{"$type":"null"}}`, `{}`, false},
	{"type of element", `{"a":{"$type":"string"}}`, `{"a":[1,"x"]}`, true},
	{"type array nested", `{"a":{"$type":"array"}}`, `{"a":[[1]]}`, true},
	{"type array scalar", `{"a":{"$type":"array"}}`, `{"a":1}`, false},
	{"type list", `{"a":{"$type":["bool","null"]}}`, `{"a":null}`, true},
	{"type code as float", `{"a":{"$type":2.0}}`, `{"a":"s"}`, true},
	{"type decimal never", `{"a":{"$type":19}}`, `{"a":1.5}`, false},

	// $regex.
	{"regex", `{"a":{"$regex":"^ab"}}`, `{"a":"abc"}`, true},
	{"regex no match", `{"a":{"$regex":"^ab"}}`, `{"a":"cab"}`, false},
	{"regex not number", `{"a":{"$regex":"1"}}`, `{"a":1}`, false},
	{"regex element", `{"a":{"$regex":"^b"}}`, `{"a":["a","b"]}`, true},
	{"regex i", `{"a":{"$regex":"ABC","$options":"i"}}`, `{"a":"xabcx"}`, true},
	{"regex u accepted", `{"a":{"$regex":"é","$options":"u"}}`, `{"a":"café"}`, true},
	{"regex x keeps class spaces", `{"a":{"$regex":"a[ ]b # c","$options":"x"}}`, `{"a":"a b"}`, true},
	{"regex x escaped space", `{"a":{"$regex":"a\\ b","$options":"x"}}`, `{"a":"a b"}`, true},
	{"regex x drops spaces", `{"a":{"$regex":"^a b$","$options":"x"}}`, `{"a":"ab"}`, true},
	{"regex with other operator", `{"a":{"$regex":"^a","$ne":"ab"}}`, `{"a":"ac"}`, true},
	{"regex options before regex", `{"a":{"$options":"i","$regex":"^A"}}`, `{"a":"ab"}`, true},

	// $size looks at arrays only, and at the leaf array itself.
	{"size", `{"a":{"$size":2}}`, `{"a":[1,[2,3]]}`, true},
	{"size zero", `{"a":{"$size":0}}`, `{"a":[]}`, true},
	{"size not string", `{"a":{"$size":1}}`, `{"a":"x"}`, false},
	{"size not missing", `{"a":{"$size":0}}`, `{}`, false},
	{"size not nested element", `{"a":{"$size":1}}`, `{"a":[[1],[2]]}`, false},
	{"size through array of objects", `{"a.b":{"$size":2}}`, `{"a":[{"b":[1]},{"b":[1,2]}]}`, true},
	{"not size", `{"a":{"$not":{"$size":2}}}`, `{"a":[1]}`, true},

	// $all.
	{"all", `{"a":{"$all":[1,2]}}`, `{"a":[2,3,1]}`, true},
	{"all one missing", `{"a":{"$all":[1,4]}}`, `{"a":[2,3,1]}`, false},
	{"all scalar", `{"a":{"$all":[1]}}`, `{"a":1}`, true},
	{"all empty", `{"a":{"$all":[]}}`, `{"a":[]}`, false},
	{"all regex", `{"a":{"$all":[{"$regex":"^x"},"yb"]}}`, `{"a":["xa","yb"]}`, true},
	{"all null missing", `{"a":{"$all":[null]}}`, `{}`, true},

	// $elemMatch needs an array; the value form applies operators to each element, the document form a query.
	{"elemMatch not array", `{"a":{"$elemMatch":{"$gt":1}}}`, `{"a":5}`, false},
	{"elemMatch one element both", `{"a":{"$elemMatch":{"$gt":1,"$lt":3}}}`, `{"a":[0,4,2]}`, true},
	{"elemMatch no element both", `{"a":{"$elemMatch":{"$gt":1,"$lt":3}}}`, `{"a":[0,4]}`, false},
	{"elemMatch value no nested flattening", `{"a":{"$elemMatch":{"$eq":1}}}`, `{"a":[[1]]}`, false},
	{"elemMatch value eq array", `{"a":{"$elemMatch":{"$eq":[1]}}}`, `{"a":[[1]]}`, true},
	{"elemMatch value not", `{"a":{"$elemMatch":{"$not":{"$gt":5}}}}`, `{"a":[7,3]}`, true},
	{"elemMatch value nin", `{"a":{"$elemMatch":{"$nin":[7,3]}}}`, `{"a":[7,3]}`, false},
	{"elemMatch value size", `{"a":{"$elemMatch":{"$size":2}}}`, `{"a":[[1],[1,2]]}`, true},
	{"elemMatch value exists", `{"a":{"$elemMatch":{"$exists":true}}}`, `{"a":[]}`, false},
	{"elemMatch value regex", `{"a":{"$elemMatch":{"$regex":"^b"}}}`, `{"a":["a","b"]}`, true},
	{"elemMatch value type", `{"a":{"$elemMatch":{"$type":"string"}}}`, `{"a":[1,"x"]}`, true},
	{"elemMatch value all", `{"a":{"$elemMatch":{"$all":[1]}}}`, `{"a":[2,1]}`, true},
	{"elemMatch nested", `{"a":{"$elemMatch":{"$elemMatch":{"$gt":5}}}}`, `{"a":[[1],[6]]}`, true},
	{"elemMatch document", `{"a":{"$elemMatch":{"b":1,"c":2}}}`, `{"a":[{"b":1},{"b":1,"c":2}]}`, true},
	{"elemMatch document split", `{"a":{"$elemMatch":{"b":1,"c":2}}}`, `{"a":[{"b":1},{"c":2}]}`, false},
	{"elemMatch document empty", `{"a":{"$elemMatch":{}}}`, `{"a":[1,{}]}`, true},
	{"elemMatch document empty scalars", `{"a":{"$elemMatch":{}}}`, `{"a":[1,2]}`, false},
	{"elemMatch document or", `{"a":{"$elemMatch":{"$or":[{"b":1},{"c":2}]}}}`, `{"a":[{"c":2}]}`, true},
	{"elemMatch document on array element", `{"a":{"$elemMatch":{"0":1}}}`, `{"a":[[1,2]]}`, true},
	{"elemMatch dotted", `{"a.b":{"$elemMatch":{"$gt":1}}}`, `{"a":{"b":[0,2]}}`, true},
	{"elemMatch through array of objects", `{"a.b":{"$elemMatch":{"c":1}}}`, `{"a":[{"b":[{"c":1}]}]}`, true},

	// $not, $and, $or, $nor.
	{"not", `{"a":{"$not":{"$gt":5}}}`, `{"a":3}`, true},
	{"not missing", `{"a":{"$not":{"$gt":5}}}`, `{}`, true},
	{"not other type", `{"a":{"$not":{"$gt":5}}}`, `{"a":"9"}`, true},
	{"not array element", `{"a":{"$not":{"$gt":5}}}`, `{"a":[1,9]}`, false},
	{"not conjunction", `{"a":{"$not":{"$gt":1,"$lt":3}}}`, `{"a":5}`, true},
	{"not eq", `{"a":{"$not":{"$eq":5}}}`, `{"a":5}`, false},
	{"and", `{"$and":[{"a":1},{"b":2}]}`, `{"a":1,"b":2}`, true},
	{"and fail", `{"$and":[{"a":1},{"b":2}]}`, `{"a":1,"b":3}`, false},
	{"or", `{"$or":[{"a":1},{"b":2}]}`, `{"a":0,"b":2}`, true},
	{"or fail", `{"$or":[{"a":1},{"b":2}]}`, `{"a":0,"b":0}`, false},
	{"nor", `{"$nor":[{"a":1},{"b":2}]}`, `{"a":0}`, true},
	{"nor fail", `{"$nor":[{"a":1},{"b":2}]}`, `{"b":2}`, false},
	{"nested logic", `{"$or":[{"$and":[{"a":1},{"b":1}]},{"c":{"$in":[1,2]}}],"d":{"$exists":false}}`, `{"c":2}`, true},
	{"empty query inside or", `{"$or":[{},{"a":1}]}`, `{}`, true},

	// Documents that are not JSON objects are empty documents.
	{"doc empty", `{"a":null}`, ``, true},
	{"doc array", `{"a":1}`, `[1]`, false},
	{"doc scalar", `{"a":{"$exists":false}}`, `5`, true},
	{"doc garbage", `{"a":1}`, `{"a":`, false},
}

func TestMatchSemantics(t *testing.T) {
	runMatchCases(t, semanticCases)
}

// realisticContext is an instance context of about 1 KB, as the engine holds for a leave request.
const realisticContext = `{
  "initiator": {"username": "alice", "display_name": "Alice Zhang", "department": "engineering",
                "manager": "bob", "roles": ["employee", "oncall"], "level": 4},
  "form": {"type": "annual", "days": 7, "start": "2025-07-01", "end": "2025-07-09",
           "reason": "family trip to the coast, booked months ago", "handover": "carol",
           "attachments": [{"name": "tickets.pdf", "size": 182044}, {"name": "hotel.pdf", "size": 90211}]},
  "approvals": [{"node": "lead", "by": "bob", "decision": "approve", "at": "2025-06-20T08:00:00Z"},
                {"node": "hr", "by": "dave", "decision": "approve", "at": "2025-06-20T09:30:00Z"}],
  "balance": {"annual": 12.5, "sick": 5, "carried_over": 2},
  "tags": ["summer", "travel", "pre-approved-budget"],
  "level": 4,
  "dept": "engineering",
  "amount": 1820.75,
  "currency": "CNY",
  "region": "cn-east",
  "cost_center": "CC-1042",
  "history": {"requests_this_year": 3, "rejected_this_year": 0, "last_request": "2025-03-11"},
  "flags": {"urgent": false, "remote": true, "needs_ceo": false},
  "notes": "Please make sure the handover document is linked in the wiki before leaving, thanks."
}`

func TestMatchRealisticContext(t *testing.T) {
	runMatchCases(t, []matchCase{
		{"benchmark condition", benchCondition, realisticContext, true},
		{"api example", `{"level":{"$gte":3}}`, realisticContext, true},
		{"attachments", `{"form.attachments.size":{"$gt":100000}}`, realisticContext, true},
		{"approvals all approve", `{"approvals":{"$not":{"$elemMatch":{"decision":{"$ne":"approve"}}}}}`, realisticContext, true},
		{"approval by", `{"approvals":{"$elemMatch":{"node":"hr","by":"erin"}}}`, realisticContext, false},
		{"flag", `{"flags.needs_ceo":true}`, realisticContext, false},
		{"days", `{"$or":[{"form.days":{"$gt":10}},{"balance.annual":{"$lt":7}}]}`, realisticContext, false},
	})
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		name, cond, op, path, msg string
	}{
		{"malformed JSON", `{"a":`, "", "", "malformed JSON"},
		{"not an object", `[{"a":1}]`, "", "", "must be a JSON object"},
		{"string", `"a"`, "", "", "must be a JSON object"},
		{"unknown operator", `{"a":{"$foo":1}}`, "$foo", "a", "not a supported operator"},
		{"unknown top-level operator", `{"$foo":1}`, "$foo", "", "not a supported top-level operator"},
		{"top-level where", `{"$where":"x"}`, "$where", "", "not a supported top-level operator"},
		{"top-level not", `{"$not":{"a":1}}`, "$not", "", "applies to a field"},
		{"operator mixed with field", `{"a":{"$gt":1,"b":2}}`, "b", "a", "cannot also hold fields"},
		{"dollar field in value", `{"a":{"b":1,"$gt":2}}`, "$gt", "a", "cannot hold a field starting with $"},
		{"dollar field nested in value", `{"a":{"b":{"$gt":2}}}`, "$gt", "a.b", "cannot hold a field starting with $"},
		{"dollar field in eq", `{"a":{"$eq":{"$x":1}}}`, "$x", "a", "cannot hold a field starting with $"},
		{"in not array", `{"a":{"$in":5}}`, "$in", "a", "needs an array"},
		{"nin not array", `{"a":{"$nin":"x"}}`, "$nin", "a", "needs an array"},
		{"all not array", `{"a":{"$all":{"b":1}}}`, "$all", "a", "needs an array"},
		{"in operator element", `{"a":{"$in":[{"$gt":1}]}}`, "$gt", "a.$in.0", "cannot hold a field starting with $"},
		{"and not array", `{"$and":{"a":1}}`, "$and", "", "non-empty array"},
		{"or empty", `{"$or":[]}`, "$or", "", "non-empty array"},
		{"nor element not object", `{"$nor":[{"a":1},2]}`, "$nor", "", "element 1 must be a query object"},
		{"nested error path", `{"$or":[{"a":1},{"b":{"$in":3}}]}`, "$in", "$or.1.b", "needs an array"},
		{"bad regex", `{"a":{"$regex":"(ab"}}`, "$regex", "a", "bad regular expression"},
		{"unsupported lookahead", `{"a":{"$regex":"a(?=b)"}}`, "$regex", "a", "bad regular expression"},
		{"regex not string", `{"a":{"$regex":5}}`, "$regex", "a", "needs a string pattern"},
		{"bad options", `{"a":{"$regex":"a","$options":"ig"}}`, "$options", "a", `unknown flag 'g'`},
		{"options not string", `{"a":{"$regex":"a","$options":1}}`, "$options", "a", "needs a string of flags"},
		{"options without regex", `{"a":{"$options":"i","$eq":"x"}}`, "$options", "a", "needs a $regex"},
		{"in bad regex", `{"a":{"$in":[{"$regex":"["}]}}`, "$regex", "a.$in.0", "bad regular expression"},
		{"size negative", `{"a":{"$size":-1}}`, "$size", "a", "non-negative"},
		{"size fraction", `{"a":{"$size":1.5}}`, "$size", "a", "whole number"},
		{"size string", `{"a":{"$size":"2"}}`, "$size", "a", "non-negative whole number"},
		{"exists string", `{"a":{"$exists":"yes"}}`, "$exists", "a", "needs true or false"},
		{"exists null", `{"a":{"$exists":null}}`, "$exists", "a", "needs true or false"},
		{"type unknown alias", `{"a":{"$type":"str"}}`, "$type", "a", `unknown type alias "str"`},
		{"type BSON only", `{"a":{"$type":"date"}}`, "$type", "a", "never occurs in a JSON document"},
		{"type BSON only code", `{"a":{"$type":9}}`, "$type", "a", "never occurs in a JSON document"},
		{"type unknown code", `{"a":{"$type":42}}`, "$type", "a", "unknown type code 42"},
		{"type bad value", `{"a":{"$type":true}}`, "$type", "a", "needs a type alias or number"},
		{"type empty list", `{"a":{"$type":[]}}`, "$type", "a", "at least one type"},
		{"not scalar", `{"a":{"$not":5}}`, "$not", "a", "needs an operator object"},
		{"not string", `{"a":{"$not":"^a"}}`, "$not", "a", "needs an operator object"},
		{"not empty", `{"a":{"$not":{}}}`, "$not", "a", "cannot be empty"},
		{"not document", `{"a":{"$not":{"b":1}}}`, "$not", "a", "not a document"},
		{"not inner error", `{"a":{"$not":{"$in":1}}}`, "$in", "a.$not", "needs an array"},
		{"elemMatch not object", `{"a":{"$elemMatch":[1]}}`, "$elemMatch", "a", "needs an object"},
		{"elemMatch inner error", `{"a":{"$elemMatch":{"b":{"$size":"x"}}}}`, "$size", "a.$elemMatch.b", "non-negative"},
		{"elemMatch value inner error", `{"a":{"$elemMatch":{"$gt":1,"b":2}}}`, "b", "a.$elemMatch", "cannot also hold fields"},
		{"all mixed elemMatch", `{"a":{"$all":[{"$elemMatch":{"b":1}},2]}}`, "$all", "a", "cannot mix"},
		{"all bad elemMatch", `{"a":{"$all":[{"$elemMatch":{"b":1},"c":2}]}}`, "$all", "a.$all.0", "exactly"},
		{"too many indexes", `{"a.0.1.2.3.4.5.6.7.8":1}`, "", "a.0.1.2.3.4.5.6.7.8", "at most 8 array indexes"},
		{"deep nesting", strings.Repeat(`{"$and":[`, 60) + `{}` + strings.Repeat(`]}`, 60), "", "", "nested deeper"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := condition.Compile([]byte(tc.cond))
			if err == nil {
				t.Fatalf("Compile(%s) = %q, want an error", tc.cond, c.String())
			}
			var ce *condition.CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *CompileError", err, err)
			}
			if ce.Operator != tc.op || ce.Path != tc.path {
				t.Errorf("error names operator %q at %q, want %q at %q (%v)", ce.Operator, ce.Path, tc.op, tc.path, err)
			}
			if !strings.Contains(ce.Message, tc.msg) {
				t.Errorf("message %q does not say %q", ce.Message, tc.msg)
			}
			text := err.Error()
			if !strings.Contains(text, tc.op) || (tc.path != "" && !strings.Contains(text, `"`+tc.path+`"`)) {
				t.Errorf("Error() = %q does not name operator %q and path %q", text, tc.op, tc.path)
			}
			if !model.IsKind(err, model.EINVALID) {
				t.Errorf("error kind = %q, want %q", model.ErrorKind(err), model.EINVALID)
			}
			var de *model.Error
			if !errors.As(err, &de) || de.Code != condition.CodeBadCondition || de.Details["operator"] != tc.op {
				t.Errorf("domain error = %+v, want code %q with the operator in details", de, condition.CodeBadCondition)
			}
		})
	}
}

func TestString(t *testing.T) {
	cases := []struct{ cond, want string }{
		{`{}`, ``},
		{`null`, ``},
		{`{"level":{"$gte":3},"dept":{"$in":["a","b"]}}`, `level >= 3 and dept in [a,b]`},
		{`{"days":{"$gt":5}}`, `days > 5`},
		{`{"a":1,"b":"x","c":true,"d":null}`, `a = 1 and b = x and c = true and d = null`},
		{`{"a":""}`, `a = ""`},
		{`{"a":{"$ne":1,"$lt":2,"$lte":3}}`, `a != 1 and a < 2 and a <= 3`},
		{`{"a":{"$nin":[1,2]}}`, `a not in [1,2]`},
		{`{"a":{"$exists":true},"b":{"$exists":false}}`, `a exists and b not exists`},
		{`{"a":{"$type":"string"},"b":{"$type":[2,"null"]}}`, `a is string and b is [string,null]`},
		{`{"name":{"$regex":"^a.*","$options":"i"}}`, `name ~ /^a.*/i`},
		{`{"tags":{"$size":2}}`, `size(tags) = 2`},
		{`{"tags":{"$all":["x","y"]}}`, `tags all [x,y]`},
		{`{"results":{"$elemMatch":{"$gte":80,"$lt":85}}}`, `results any (>= 80 and < 85)`},
		{`{"items":{"$elemMatch":{"sku":"x","qty":{"$gt":1}}}}`, `items any (sku = x and qty > 1)`},
		{`{"a":{"$not":{"$gt":5}}}`, `not (a > 5)`},
		{`{"$or":[{"a":1},{"b":2}],"c":3}`, `(a = 1 or b = 2) and c = 3`},
		{`{"$or":[{"a":1,"b":2},{"c":3}]}`, `(a = 1 and b = 2) or c = 3`},
		{`{"$nor":[{"a":1},{"b":2}]}`, `not (a = 1 or b = 2)`},
		{`{"$and":[{"a":1}]}`, `a = 1`},
		{`{"a":{"b":[1,{"c":"d"}]}}`, `a = {b:[1,{c:d}]}`},
		{`{"a":{"$in":[1,2,3,4,5,6,7,8]}}`, `a in [1,2,3,4,5,…]`},
		{`{"a":"` + strings.Repeat("x", 40) + `"}`, `a = ` + strings.Repeat("x", 31) + `…`},
	}
	for _, tc := range cases {
		c, err := condition.Compile([]byte(tc.cond))
		if err != nil {
			t.Fatalf("Compile(%s): %v", tc.cond, err)
		}
		if got := c.String(); got != tc.want {
			t.Errorf("String(%s) = %q, want %q", tc.cond, got, tc.want)
		}
	}
	var nilCond *condition.Condition
	if nilCond.String() != "" || !nilCond.Match([]byte(`{}`)) || !nilCond.Always() {
		t.Error("a nil condition must be empty and match everything")
	}
}

func TestAlways(t *testing.T) {
	for cond, want := range map[string]bool{``: true, ` null `: true, `{}`: true, `{"a":1}`: false, `{"$or":[{}]}`: false} { //nolint:gocritic // mapKey: the spaces around null are under test
		c, err := condition.Compile([]byte(cond))
		if err != nil {
			t.Fatalf("Compile(%q): %v", cond, err)
		}
		if c.Always() != want {
			t.Errorf("Compile(%q).Always() = %v, want %v", cond, c.Always(), want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	got, err := condition.Evaluate([]byte(`{"days":{"$gt":5}}`), []byte(`{"days":3}`))
	if err != nil || got {
		t.Errorf("Evaluate(days > 5, days 3) = %v, %v; want false, nil", got, err)
	}
	got, err = condition.Evaluate([]byte(`{"days":{"$gt":5}}`), []byte(`{"days":8}`))
	if err != nil || !got {
		t.Errorf("Evaluate(days > 5, days 8) = %v, %v; want true, nil", got, err)
	}
	got, err = condition.Evaluate([]byte(`{"days":null}`), nil)
	if err != nil || !got {
		t.Errorf("Evaluate with no context = %v, %v; want true (empty document), nil", got, err)
	}
	if _, err = condition.Evaluate([]byte(`{"days":{"$gt":[}}`), []byte(`{}`)); !model.IsKind(err, model.EINVALID) {
		t.Errorf("Evaluate with a bad condition: err = %v, want EINVALID", err)
	}
	for _, doc := range []string{`[1,2]`, `5`, `{"a":`, strings.Repeat("[", 20000)} {
		if _, err = condition.Evaluate([]byte(`{}`), []byte(doc)); !model.IsKind(err, model.EINVALID) {
			t.Errorf("Evaluate with context %s: err = %v, want EINVALID", doc, err)
		}
	}
}

// TestHostileIndexPath checks the worst case of index paths: every level of the document is an array whose
// first element is an object with a field "0", so each index in the path is followed two ways.
func TestHostileIndexPath(t *testing.T) {
	doc := "1"
	for range 40 {
		doc = `[{"0":` + doc + `}]`
	}
	doc = `{"a":` + doc + `}`
	c, err := condition.Compile([]byte(`{"a.0.0.0.0.0.0.0.0":{"$gt":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 100 {
		if c.Match([]byte(doc)) {
			t.Fatal("no value is greater than 5")
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("100 matches took %v", d)
	}
}

// TestConcurrentMatch shares one compiled condition between goroutines, as the engine does across instances.
func TestConcurrentMatch(t *testing.T) {
	c, err := condition.Compile([]byte(`{"n":{"$gte":50},"tags":{"$regex":"^x"},"items":{"$elemMatch":{"q":{"$lt":3}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for n := range 100 {
				doc := fmt.Sprintf(`{"n":%d,"tags":["a","x%d"],"items":[{"q":%d}]}`, n, g, n%5)
				want := n >= 50 && n%5 < 3
				if got := c.Match([]byte(doc)); got != want {
					errs <- fmt.Sprintf("Match(%s) = %v, want %v", doc, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestMatchDoesNotKeepDoc checks that a document buffer can be reused after Match returns.
func TestMatchDoesNotKeepDoc(t *testing.T) {
	c, err := condition.Compile([]byte(`{"a":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	buf := []byte(`{"a":"x"}`)
	if !c.Match(buf) {
		t.Fatal("first match failed")
	}
	copy(buf, `{"a":"y"}`)
	if c.Match(buf) {
		t.Fatal("a reused buffer must be read afresh")
	}
}

// TestCompileCopiesCondition checks that the compiled form does not depend on the caller's buffer.
func TestCompileCopiesCondition(t *testing.T) {
	buf := []byte(`{"a":"x"}`)
	c, err := condition.Compile(buf)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, `{"b":"y"}`)
	if !c.Match([]byte(`{"a":"x"}`)) || c.String() != "a = x" {
		t.Fatalf("compiled condition changed with its source buffer: %q", c.String())
	}
}
