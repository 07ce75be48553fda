package condition_test

import (
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/service/condition"
)

// collection is a set of documents from a MongoDB documentation page and the queries the page runs on
// them, each with the _id values db.collection.find(query) returns.
type collection struct {
	name    string
	source  string // where the documents and queries come from
	docs    []string
	queries []query
}

type query struct {
	cond string
	want []string // _id values, in document order
}

// find returns the _id (as text) of every document the condition matches, as db.collection.find() does.
func find(t *testing.T, docs []string, cond string) []string {
	t.Helper()
	c, err := condition.Compile([]byte(cond))
	if err != nil {
		t.Fatalf("Compile(%s): %v", cond, err)
	}
	ids := []string{}
	for _, d := range docs {
		if !gjson.Valid(d) {
			t.Fatalf("test document is not valid JSON: %s", d)
		}
		if condition.MatchStrict(c, []byte(d)) {
			ids = append(ids, gjson.Get(d, "_id").String())
		}
	}
	return ids
}

func runCollections(t *testing.T, cols []collection) {
	t.Helper()
	for _, col := range cols {
		t.Run(col.name, func(t *testing.T) {
			for _, q := range col.queries {
				got := find(t, col.docs, q.cond)
				want := q.want
				if want == nil {
					want = []string{}
				}
				if !slices.Equal(got, want) {
					t.Errorf("find(%s) = %v, want %v  (%s)", q.cond, got, want, col.source)
				}
			}
		})
	}
}

// mongoCollections are the examples of MongoDB's manual, with the results the manual gives.
var mongoCollections = []collection{
	{
		name:   "query embedded documents",
		source: "https://www.mongodb.com/docs/manual/tutorial/query-embedded-documents/",
		docs: []string{
			`{"_id":"journal","qty":25,"size":{"h":14,"w":21,"uom":"cm"},"status":"A"}`,
			`{"_id":"notebook","qty":50,"size":{"h":8.5,"w":11,"uom":"in"},"status":"A"}`,
			`{"_id":"paper","qty":100,"size":{"h":8.5,"w":11,"uom":"in"},"status":"D"}`,
			`{"_id":"planner","qty":75,"size":{"h":22.85,"w":30,"uom":"cm"},"status":"D"}`,
			`{"_id":"postcard","qty":45,"size":{"h":10,"w":15.25,"uom":"cm"},"status":"A"}`,
		},
		queries: []query{
			{`{"size":{"h":14,"w":21,"uom":"cm"}}`, []string{"journal"}},
			// Equality on a whole embedded document needs the same field order.
			{`{"size":{"w":21,"h":14,"uom":"cm"}}`, nil},
			{`{"size.uom":"in"}`, []string{"notebook", "paper"}},
			{`{"size.h":{"$lt":15}}`, []string{"journal", "notebook", "paper", "postcard"}},
			{`{"size.h":{"$lt":15},"size.uom":"in","status":"D"}`, []string{"paper"}},
		},
	},
	{
		name:   "query an array",
		source: "https://www.mongodb.com/docs/manual/tutorial/query-arrays/",
		docs: []string{
			`{"_id":"journal","qty":25,"tags":["blank","red"],"dim_cm":[14,21]}`,
			`{"_id":"notebook","qty":50,"tags":["red","blank"],"dim_cm":[14,21]}`,
			`{"_id":"paper","qty":100,"tags":["red","blank","plain"],"dim_cm":[14,21]}`,
			`{"_id":"planner","qty":75,"tags":["blank","red"],"dim_cm":[22.85,30]}`,
			`{"_id":"postcard","qty":45,"tags":["blue"],"dim_cm":[10,15.25]}`,
		},
		queries: []query{
			{`{"tags":["red","blank"]}`, []string{"notebook"}},
			{`{"tags":{"$all":["red","blank"]}}`, []string{"journal", "notebook", "paper", "planner"}},
			{`{"tags":"red"}`, []string{"journal", "notebook", "paper", "planner"}},
			{`{"dim_cm":{"$gt":25}}`, []string{"planner"}},
			// Compound conditions on an array: different elements may satisfy each condition.
			{`{"dim_cm":{"$gt":15,"$lt":20}}`, []string{"journal", "notebook", "paper", "postcard"}},
			{`{"dim_cm":{"$elemMatch":{"$gt":22,"$lt":30}}}`, []string{"planner"}},
			{`{"dim_cm.1":{"$gt":25}}`, []string{"planner"}},
			{`{"tags":{"$size":3}}`, []string{"paper"}},
		},
	},
	{
		name:   "query an array of embedded documents",
		source: "https://www.mongodb.com/docs/manual/tutorial/query-array-of-documents/",
		docs: []string{
			`{"_id":"journal","instock":[{"warehouse":"A","qty":5},{"warehouse":"C","qty":15}]}`,
			`{"_id":"notebook","instock":[{"warehouse":"C","qty":5}]}`,
			`{"_id":"paper","instock":[{"warehouse":"A","qty":60},{"warehouse":"B","qty":15}]}`,
			`{"_id":"planner","instock":[{"warehouse":"A","qty":40},{"warehouse":"B","qty":5}]}`,
			`{"_id":"postcard","instock":[{"warehouse":"B","qty":15},{"warehouse":"C","qty":35}]}`,
		},
		queries: []query{
			{`{"instock":{"warehouse":"A","qty":5}}`, []string{"journal"}},
			{`{"instock":{"qty":5,"warehouse":"A"}}`, nil},
			{`{"instock.0.qty":{"$lte":20}}`, []string{"journal", "notebook", "postcard"}},
			{`{"instock.qty":{"$lte":20}}`, []string{"journal", "notebook", "paper", "planner", "postcard"}},
			{`{"instock":{"$elemMatch":{"qty":5,"warehouse":"A"}}}`, []string{"journal"}},
			{`{"instock":{"$elemMatch":{"qty":{"$gt":10,"$lte":20}}}}`, []string{"journal", "paper", "postcard"}},
			{`{"instock.qty":{"$gt":10,"$lte":20}}`, []string{"journal", "paper", "planner", "postcard"}},
			{`{"instock.qty":5,"instock.warehouse":"A"}`, []string{"journal", "planner"}},
		},
	},
	{
		name:   "query for null or missing fields",
		source: "https://www.mongodb.com/docs/manual/tutorial/query-for-null-fields/",
		docs:   []string{`{"_id":1,"item":null}`, `{"_id":2}`},
		queries: []query{
			{`{"item":null}`, []string{"1", "2"}},
			{`{"item":{"$ne":null}}`, nil},
			{`{"item":{"$type":10}}`, []string{"1"}},
			{`{"item":{"$type":"null"}}`, []string{"1"}},
			{`{"item":{"$exists":false}}`, []string{"2"}},
		},
	},
	{
		name:   "$eq",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/eq/",
		docs: []string{
			`{"_id":1,"item":{"name":"ab","code":"123"},"qty":15,"tags":["A","B","C"]}`,
			`{"_id":2,"item":{"name":"cd","code":"123"},"qty":20,"tags":["B"]}`,
			`{"_id":3,"item":{"name":"ij","code":"456"},"qty":25,"tags":["A","B"]}`,
			`{"_id":4,"item":{"name":"xy","code":"456"},"qty":30,"tags":["B","A"]}`,
			`{"_id":5,"item":{"name":"mn","code":"000"},"qty":20,"tags":[["A","B"],"C"]}`,
		},
		queries: []query{
			{`{"qty":{"$eq":20}}`, []string{"2", "5"}},
			{`{"qty":20}`, []string{"2", "5"}},
			{`{"item.name":{"$eq":"ab"}}`, []string{"1"}},
			{`{"tags":{"$eq":"B"}}`, []string{"1", "2", "3", "4"}},
			// An array value matches an equal array, or an equal element of an array.
			{`{"tags":{"$eq":["A","B"]}}`, []string{"3", "5"}},
			{`{"tags":["A","B"]}`, []string{"3", "5"}},
		},
	},
	{
		name:   "$eq and $regex on strings",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/eq/ (Regex Match Behaviour)",
		docs:   []string{`{"_id":1,"company":"MongoDB"}`, `{"_id":2,"company":"MongoDB2"}`},
		queries: []query{
			{`{"company":"MongoDB"}`, []string{"1"}},
			{`{"company":{"$eq":"MongoDB"}}`, []string{"1"}},
			{`{"company":{"$regex":"MongoDB"}}`, []string{"1", "2"}},
		},
	},
	{
		name:   "$gt $gte $lt $lte $ne",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/gt/ (and gte, lt, lte, ne)",
		docs: []string{
			`{"_id":"nuts","quantity":30,"carrier":{"name":"Shipit","fee":3}}`,
			`{"_id":"bolts","quantity":50,"carrier":{"name":"Shipit","fee":4}}`,
			`{"_id":"washers","quantity":10,"carrier":{"name":"Shipit","fee":1}}`,
			`{"_id":"screws","quantity":20}`,
		},
		queries: []query{
			{`{"quantity":{"$gt":20}}`, []string{"nuts", "bolts"}},
			{`{"quantity":{"$gte":20}}`, []string{"nuts", "bolts", "screws"}},
			{`{"quantity":{"$lt":20}}`, []string{"washers"}},
			{`{"quantity":{"$lte":20}}`, []string{"washers", "screws"}},
			{`{"carrier.fee":{"$gt":2}}`, []string{"nuts", "bolts"}},
			{`{"quantity":{"$ne":20}}`, []string{"nuts", "bolts", "washers"}},
			// $ne also selects the documents that do not have the field.
			{`{"carrier.fee":{"$ne":1}}`, []string{"nuts", "bolts", "screws"}},
		},
	},
	{
		name:   "$in and $nin",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/in/ and .../nin/",
		docs: []string{
			`{"_id":"Pens","quantity":350,"tags":["school","office"]}`,
			`{"_id":"Erasers","quantity":15,"tags":["school","home"]}`,
			`{"_id":"Maps","tags":["office","storage"]}`,
			`{"_id":"Books","quantity":5,"tags":["school","storage","home"]}`,
		},
		queries: []query{
			{`{"quantity":{"$in":[5,15]}}`, []string{"Erasers", "Books"}},
			{`{"tags":{"$in":["home","school"]}}`, []string{"Pens", "Erasers", "Books"}},
			{`{"tags":{"$in":[{"$regex":"^be"},{"$regex":"^st"}]}}`, []string{"Maps", "Books"}},
			{`{"quantity":{"$nin":[5,15]}}`, []string{"Pens", "Maps"}},
			{`{"tags":{"$nin":["school"]}}`, []string{"Maps"}},
			{`{"quantity":{"$in":[]}}`, nil},
			{`{"quantity":{"$nin":[]}}`, []string{"Pens", "Erasers", "Maps", "Books"}},
		},
	},
	{
		name:   "$exists",
		source: "https://www.mongodb.com/docs/v4.4/reference/operator/query/exists/ (records collection)",
		docs: []string{
			`{"_id":1,"a":5,"b":5,"c":null}`,
			`{"_id":2,"a":3,"b":null,"c":8}`,
			`{"_id":3,"a":null,"b":3,"c":9}`,
			`{"_id":4,"a":1,"b":2,"c":3}`,
			`{"_id":5,"a":2,"c":5}`,
			`{"_id":6,"a":3,"b":2}`,
			`{"_id":7,"a":4}`,
			`{"_id":8,"b":2,"c":4}`,
			`{"_id":9,"b":2}`,
			`{"_id":10,"c":6}`,
		},
		queries: []query{
			{`{"a":{"$exists":true}}`, []string{"1", "2", "3", "4", "5", "6", "7"}},
			{`{"b":{"$exists":false}}`, []string{"5", "7", "10"}},
			{`{"c":{"$exists":true,"$nin":[5,15]}}`, []string{"1", "2", "3", "4", "8", "10"}},
			{`{"a":{"$exists":1}}`, []string{"1", "2", "3", "4", "5", "6", "7"}},
			{`{"a":{"$exists":0}}`, []string{"8", "9", "10"}},
		},
	},
	{
		name:   "$type",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/type/ (addressBook; in JSON 43339374 is integral, so an int and a long rather than the shell's double)",
		docs: []string{
			`{"_id":1,"address":"2030 Martian Way","zipCode":"90698345"}`,
			`{"_id":2,"address":"156 Lunar Place","zipCode":43339374}`,
			`{"_id":3,"address":"2324 Pluto Place","zipCode":3921412}`,
			`{"_id":4,"address":"55 Saturn Ring","zipCode":88602117.5}`,
			`{"_id":5,"address":"104 Venus Drive","zipCode":["834847278","1893289032"]}`,
		},
		queries: []query{
			{`{"zipCode":{"$type":2}}`, []string{"1", "5"}},
			{`{"zipCode":{"$type":"string"}}`, []string{"1", "5"}},
			{`{"zipCode":{"$type":1}}`, []string{"4"}},
			{`{"zipCode":{"$type":"double"}}`, []string{"4"}},
			{`{"zipCode":{"$type":"number"}}`, []string{"2", "3", "4"}},
			{`{"zipCode":{"$type":"int"}}`, []string{"2", "3"}},
			{`{"zipCode":{"$type":18}}`, []string{"2", "3"}},
			{`{"zipCode":{"$type":"decimal"}}`, nil},
			{`{"zipCode":{"$type":["string","double"]}}`, []string{"1", "4", "5"}},
			// For an array field $type matches when an element has the type, and "array" matches the array.
			{`{"zipCode":{"$type":"array"}}`, []string{"5"}},
			{`{"zipCode":{"$type":4}}`, []string{"5"}},
		},
	},
	{
		name:   "$regex",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/regex/ (products collection)",
		docs: []string{
			`{"_id":100,"sku":"abc123","description":"Single line description."}`,
			`{"_id":101,"sku":"abc789","description":"First line\nSecond line"}`,
			`{"_id":102,"sku":"xyz456","description":"Many spaces before     line"}`,
			`{"_id":103,"sku":"xyz789","description":"Multiple\nline description"}`,
			`{"_id":104,"sku":"Abc789","description":"SKU starts with A"}`,
		},
		queries: []query{
			{`{"sku":{"$regex":"789$"}}`, []string{"101", "103", "104"}},
			{`{"sku":{"$regex":"^ABC","$options":"i"}}`, []string{"100", "101", "104"}},
			{`{"description":{"$regex":"^S","$options":"m"}}`, []string{"100", "101", "104"}},
			{`{"description":{"$regex":"^S"}}`, []string{"100", "104"}},
			{`{"description":{"$regex":"m.*line","$options":"si"}}`, []string{"102", "103"}},
			{`{"description":{"$regex":"m.*line","$options":"i"}}`, []string{"102"}},
			{`{"sku":{"$regex":"abc #category code\n123 #item number","$options":"x"}}`, []string{"100"}},
			{`{"sku":{"$not":{"$regex":"^abc"}}}`, []string{"102", "103", "104"}},
		},
	},
	{
		name:   "$size",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/size/",
		docs: []string{
			`{"_id":1,"field":["red","green"]}`,
			`{"_id":2,"field":["apple","lime"]}`,
			`{"_id":3,"field":"fruit"}`,
			`{"_id":4,"field":["orange","lemon","grapefruit"]}`,
			`{"_id":5,"field":["orange"]}`,
		},
		queries: []query{
			{`{"field":{"$size":2}}`, []string{"1", "2"}},
			{`{"field":{"$size":1}}`, []string{"5"}},
			{`{"field":{"$size":2.0}}`, []string{"1", "2"}},
		},
	},
	{
		name:   "$all",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/all/",
		docs: []string{
			`{"_id":"xyz","tags":["school","book","bag","headphone","appliance"],"qty":[{"size":"S","num":10,"color":"blue"},{"size":"M","num":45,"color":"blue"},{"size":"L","num":100,"color":"green"}]}`,
			`{"_id":"abc","tags":["appliance","school","book"],"qty":[{"size":"6","num":100,"color":"green"},{"size":"6","num":50,"color":"blue"},{"size":"8","num":100,"color":"brown"}]}`,
			`{"_id":"efg","tags":["school","book"],"qty":[{"size":"S","num":10,"color":"blue"},{"size":"M","num":100,"color":"blue"},{"size":"L","num":100,"color":"green"}]}`,
			`{"_id":"ijk","tags":["electronics","school"],"qty":[{"size":"M","num":100,"color":"green"}]}`,
			`{"_id":"lvl","level":"advanced","tags":[["ssl","security"],"x"]}`,
			`{"_id":"sec","tags":["ssl","security"]}`,
		},
		queries: []query{
			{`{"tags":{"$all":["appliance","school","book"]}}`, []string{"xyz", "abc"}},
			{`{"qty":{"$all":[{"$elemMatch":{"size":"M","num":{"$gt":50}}},{"$elemMatch":{"num":100,"color":"green"}}]}}`, []string{"efg", "ijk"}},
			{`{"qty.num":{"$all":[50]}}`, []string{"abc"}},
			{`{"qty.num":50}`, []string{"abc"}},
			// $all on a field that is not an array matches a single equal value.
			{`{"level":{"$all":["advanced"]}}`, []string{"lvl"}},
			// A nested array matches an element equal to it, or an array equal to it.
			{`{"tags":{"$all":[["ssl","security"]]}}`, []string{"lvl", "sec"}},
			{`{"tags":{"$all":["ssl","security"]}}`, []string{"sec"}},
			{`{"tags":{"$all":[]}}`, nil},
		},
	},
	{
		name:   "$elemMatch",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/elemMatch/",
		docs: []string{
			`{"_id":1,"results":[82,85,88]}`,
			`{"_id":2,"results":[75,88,89]}`,
		},
		queries: []query{
			{`{"results":{"$elemMatch":{"$gte":80,"$lt":85}}}`, []string{"1"}},
			{`{"results":{"$gte":80,"$lt":85}}`, []string{"1", "2"}},
		},
	},
	{
		name:   "$elemMatch on embedded documents",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/elemMatch/ (survey collection)",
		docs: []string{
			`{"_id":1,"results":[{"product":"abc","score":10},{"product":"xyz","score":5}]}`,
			`{"_id":2,"results":[{"product":"abc","score":8},{"product":"xyz","score":7}]}`,
			`{"_id":3,"results":[{"product":"abc","score":7},{"product":"xyz","score":8}]}`,
			`{"_id":4,"results":[{"product":"abc","score":7},{"product":"def","score":8}]}`,
			`{"_id":5,"results":{"product":"xyz","score":7}}`,
		},
		queries: []query{
			{`{"results":{"$elemMatch":{"product":"xyz","score":{"$gte":8}}}}`, []string{"3"}},
			{`{"results":{"$elemMatch":{"product":"xyz"}}}`, []string{"1", "2", "3"}},
			{`{"results.product":"xyz"}`, []string{"1", "2", "3", "5"}},
			{`{"results":{"$elemMatch":{"product":{"$ne":"xyz"}}}}`, []string{"1", "2", "3", "4"}},
			{`{"results.product":{"$ne":"xyz"}}`, []string{"4"}},
		},
	},
	{
		name:   "$and $or $nor $not",
		source: "https://www.mongodb.com/docs/manual/reference/operator/query/and/ (and or, nor, not)",
		docs: []string{
			`{"_id":1,"item":"Flat","price":1.99,"qty":15,"sale":true}`,
			`{"_id":2,"item":"Square","price":5,"qty":25,"sale":false}`,
			`{"_id":3,"item":"pencil","price":1.99,"sale":false}`,
			`{"_id":4,"item":"paper","qty":30}`,
			`{"_id":5,"item":"bag","price":"1.99","sale":true}`,
			`{"_id":6,"item":"pen","price":10}`,
		},
		queries: []query{
			{`{"$and":[{"price":{"$ne":1.99}},{"price":{"$exists":true}}]}`, []string{"2", "5", "6"}},
			{`{"price":{"$ne":1.99,"$exists":true}}`, []string{"2", "5", "6"}},
			{`{"$or":[{"qty":{"$lt":20}},{"price":10}]}`, []string{"1", "6"}},
			// $nor selects the documents where none of the conditions holds, missing fields included.
			{`{"$nor":[{"price":1.99},{"sale":true}]}`, []string{"2", "4", "6"}},
			{`{"$nor":[{"price":1.99},{"qty":{"$lt":20}},{"sale":true}]}`, []string{"2", "4", "6"}},
			// $not selects non-matching values, missing fields and values of other types.
			{`{"price":{"$not":{"$gt":1.99}}}`, []string{"1", "3", "4", "5"}},
			{`{"item":{"$not":{"$regex":"^p.*"}}}`, []string{"1", "2", "5"}},
			{`{"item":{"$not":{"$regex":"^P.*","$options":"i"}}}`, []string{"1", "2", "5"}},
		},
	},
	{
		name:   "type bracketing",
		source: "https://www.mongodb.com/docs/manual/reference/mql/query-predicates/type-bracketing/",
		docs: []string{
			`{"_id":"apples","qty":5}`,
			`{"_id":"bananas","qty":7}`,
			`{"_id":"apricots","qty":3}`,
			`{"_id":"oranges","qty":{"in stock":8,"ordered":12}}`,
			`{"_id":"avocados","qty":"fourteen"}`,
			`{"_id":"mixed","qty":["red",4.5,"blue"]}`,
			`{"_id":"words","qty":["red","blue"]}`,
		},
		queries: []query{
			{`{"qty":{"$gt":4}}`, []string{"apples", "bananas", "mixed"}},
			{`{"qty":{"$ne":5}}`, []string{"bananas", "apricots", "oranges", "avocados", "mixed", "words"}},
			{`{"qty":{"$gte":"a"}}`, []string{"avocados", "mixed", "words"}},
			{`{"qty":{"$lt":{}}}`, nil},
			{`{"qty":{"$gt":{}}}`, []string{"oranges"}},
		},
	},
}

// nullSemantics are the documents and queries of MongoDB's own null test (jstests/core/null_query_semantics.js
// in mongodb/mongo), less the documents holding `undefined`, which JSON cannot express.
var nullSemantics = collection{
	name:   "null query semantics",
	source: "mongodb/mongo jstests/core/null_query_semantics.js",
	docs: []string{
		`{"_id":"a_empty_subobject","a":{}}`,
		`{"_id":"a_null","a":null}`,
		`{"_id":"a_number","a":4}`,
		`{"_id":"a_subobject_b_not_null","a":{"b":"hi"}}`,
		`{"_id":"a_subobject_b_null","a":{"b":null}}`,
		`{"_id":"no_a"}`,
		`{"_id":"a_double_array","a":[[]]}`,
		`{"_id":"a_empty_array","a":[]}`,
		`{"_id":"a_object_array_all_b_nulls","a":[{"b":null},{"b":null},{}]}`,
		`{"_id":"a_object_array_no_b_nulls","a":[{"b":1},{"b":3},{"b":"string"}]}`,
		`{"_id":"a_object_array_some_b_nulls","a":[{"b":null},{"b":3},{"b":null}]}`,
		`{"_id":"a_object_array_some_b_missing","a":[{"b":3},{}]}`,
		`{"_id":"a_value_array_all_nulls","a":[null,null]}`,
		`{"_id":"a_value_array_no_nulls","a":[1,"string",4]}`,
		`{"_id":"a_value_array_with_null","a":[1,"string",null,4]}`,
	},
	queries: []query{
		{`{"a":{"$eq":null}}`, []string{"a_null", "no_a", "a_value_array_all_nulls", "a_value_array_with_null"}},
		{`{"a":{"$ne":null}}`, []string{"a_empty_subobject", "a_number", "a_subobject_b_not_null", "a_subobject_b_null",
			"a_double_array", "a_empty_array", "a_object_array_all_b_nulls", "a_object_array_no_b_nulls",
			"a_object_array_some_b_nulls", "a_object_array_some_b_missing", "a_value_array_no_nulls"}},
		{`{"a":{"$not":{"$gte":null}}}`, []string{"a_empty_subobject", "a_number", "a_subobject_b_not_null",
			"a_subobject_b_null", "a_double_array", "a_empty_array", "a_object_array_all_b_nulls",
			"a_object_array_no_b_nulls", "a_object_array_some_b_nulls", "a_object_array_some_b_missing",
			"a_value_array_no_nulls"}},
		{`{"a":{"$in":[null,75]}}`, []string{"a_null", "no_a", "a_value_array_all_nulls", "a_value_array_with_null"}},
		{`{"$or":[{"a":null},{"a":75}]}`, []string{"a_null", "no_a", "a_value_array_all_nulls", "a_value_array_with_null"}},
		{`{"a":{"$nin":[null,75]}}`, []string{"a_empty_subobject", "a_number", "a_subobject_b_not_null", "a_subobject_b_null",
			"a_double_array", "a_empty_array", "a_object_array_all_b_nulls", "a_object_array_no_b_nulls",
			"a_object_array_some_b_nulls", "a_object_array_some_b_missing", "a_value_array_no_nulls"}},
		{`{"a":{"$nin":[null,{"$regex":"^str.*"}]}}`, []string{"a_empty_subobject", "a_number", "a_subobject_b_not_null",
			"a_subobject_b_null", "a_double_array", "a_empty_array", "a_object_array_all_b_nulls",
			"a_object_array_no_b_nulls", "a_object_array_some_b_nulls", "a_object_array_some_b_missing"}},
		{`{"a":{"$exists":false}}`, []string{"no_a"}},
		{`{"a":{"$elemMatch":{"$eq":null}}}`, []string{"a_value_array_all_nulls", "a_value_array_with_null"}},
		{`{"a":{"$elemMatch":{"$ne":null}}}`, []string{"a_double_array", "a_object_array_all_b_nulls",
			"a_object_array_no_b_nulls", "a_object_array_some_b_nulls", "a_object_array_some_b_missing",
			"a_value_array_no_nulls", "a_value_array_with_null"}},
		// {"a.b": null}: a scalar or null a, an object a without a non-null b, or an array with such an object.
		{`{"a.b":{"$eq":null}}`, []string{"a_empty_subobject", "a_null", "a_number", "a_subobject_b_null", "no_a",
			"a_object_array_all_b_nulls", "a_object_array_some_b_nulls", "a_object_array_some_b_missing"}},
		{`{"a.b":{"$ne":null}}`, []string{"a_subobject_b_not_null", "a_double_array", "a_empty_array",
			"a_object_array_no_b_nulls", "a_value_array_all_nulls", "a_value_array_no_nulls", "a_value_array_with_null"}},
		{`{"a.b":{"$in":[null,75]}}`, []string{"a_empty_subobject", "a_null", "a_number", "a_subobject_b_null", "no_a",
			"a_object_array_all_b_nulls", "a_object_array_some_b_nulls", "a_object_array_some_b_missing"}},
		{`{"a.b":{"$nin":[null,75]}}`, []string{"a_subobject_b_not_null", "a_double_array", "a_empty_array",
			"a_object_array_no_b_nulls", "a_value_array_all_nulls", "a_value_array_no_nulls", "a_value_array_with_null"}},
		{`{"a.b":{"$nin":[null,{"$regex":"^str.*"}]}}`, []string{"a_subobject_b_not_null", "a_double_array",
			"a_empty_array", "a_value_array_all_nulls", "a_value_array_no_nulls", "a_value_array_with_null"}},
		// Derived from the path rules the test exercises (the file checks this query on non-array documents only).
		{`{"a.b":{"$exists":false}}`, []string{"a_empty_subobject", "a_null", "a_number", "no_a", "a_double_array",
			"a_empty_array", "a_value_array_all_nulls", "a_value_array_no_nulls", "a_value_array_with_null"}},
		{`{"a.b":{"$elemMatch":{"$eq":null}}}`, nil},
		{`{"a.b":{"$elemMatch":{"$ne":null}}}`, nil},
		{`{"a":{"$elemMatch":{"b":{"$eq":null}}}}`, []string{"a_double_array", "a_object_array_all_b_nulls",
			"a_object_array_some_b_nulls", "a_object_array_some_b_missing"}},
		{`{"a":{"$elemMatch":{"b":{"$ne":null}}}}`, []string{"a_object_array_no_b_nulls", "a_object_array_some_b_nulls",
			"a_object_array_some_b_missing"}},
	},
}

func TestMongoDBDocumentationExamples(t *testing.T) {
	runCollections(t, mongoCollections)
}

func TestMongoDBNullSemantics(t *testing.T) {
	runCollections(t, []collection{nullSemantics})
}

// allQueries returns every query of the tables, for the fuzz seeds.
func allQueries() []string {
	var qs []string
	for _, col := range append(slices.Clone(mongoCollections), nullSemantics) {
		for _, q := range col.queries {
			qs = append(qs, q.cond)
		}
	}
	return qs
}

// allDocs returns every document of the tables, for the fuzz seeds.
func allDocs() []string {
	var ds []string
	for _, col := range append(slices.Clone(mongoCollections), nullSemantics) {
		ds = append(ds, col.docs...)
	}
	return ds
}
