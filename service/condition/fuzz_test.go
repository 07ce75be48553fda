package condition_test

import (
	"testing"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/service/condition"
)

// FuzzCompileMatch feeds arbitrary condition and document bytes through Compile, Match and String: none may
// panic, String must be stable, and a compiled condition must give the same answer twice.
func FuzzCompileMatch(f *testing.F) {
	for _, tc := range semanticCases {
		f.Add([]byte(tc.cond), []byte(tc.doc))
	}
	docs := allDocs()
	for i, q := range allQueries() {
		f.Add([]byte(q), []byte(docs[i%len(docs)]))
	}
	f.Add([]byte(benchCondition), []byte(realisticContext))
	// Documents whose strings hold quotes, backslashes and brackets, for the one-pass index.
	f.Add([]byte(`{"a":1,"c\"d":{"$exists":true},"z":"]"}`), []byte(`{"x":"}\\","c\"d":[{"q":"\"]"}],"a":1,"z":"]"}`))
	f.Add([]byte(`{"b":{"$type":"object"},"a\u0062":2}`), []byte(`{"s":"\\\"{[","ab":2,"b":{"k":"\u005d"}}`))
	f.Fuzz(func(t *testing.T, cond, doc []byte) {
		c, err := condition.Compile(cond)
		if err != nil {
			if _, ok := err.(*condition.CompileError); !ok {
				t.Fatalf("Compile error %T is not a *CompileError", err)
			}
			_ = err.Error()
			return
		}
		s := c.String()
		first := condition.MatchStrict(c, doc)
		if condition.MatchStrict(c, doc) != first {
			t.Fatal("Match is not deterministic")
		}
		if gjson.ValidBytes(doc) && condition.MatchWithoutIndex(c, doc) != first {
			t.Fatalf("the one-pass index of top-level fields disagrees with gjson.Get on %q", doc)
		}
		if c.String() != s {
			t.Fatal("String is not stable")
		}
		if _, err := condition.Evaluate(cond, doc); err != nil {
			if _, ok := err.(*condition.CompileError); ok {
				t.Fatalf("Evaluate fails to compile what Compile accepted: %v", err)
			}
		}
	})
}
