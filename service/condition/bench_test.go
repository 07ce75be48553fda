package condition_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/halley-bpm/halley/service/condition"
)

// benchCondition is a typical edge condition: three clauses over a nested field, an array and a number.
const benchCondition = `{"level":{"$gte":3},"form.type":{"$in":["annual","sick"]},"tags":{"$ne":"blocked"}}`

func BenchmarkMatch(b *testing.B) {
	benchmarkMatch(b, (*condition.Condition).Match)
}

// BenchmarkMatchWithoutIndex is Match with every clause finding its field with gjson.Get, the way the
// one-pass index of top-level fields replaces; it shows what the index saves.
func BenchmarkMatchWithoutIndex(b *testing.B) {
	benchmarkMatch(b, condition.MatchWithoutIndex)
}

func benchmarkMatch(b *testing.B, match func(*condition.Condition, []byte) bool) {
	c, err := condition.Compile([]byte(benchCondition))
	if err != nil {
		b.Fatal(err)
	}
	// The engine stores contexts as compact JSON (json.Marshal output): about 1 KB here.
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(realisticContext)); err != nil {
		b.Fatal(err)
	}
	doc := buf.Bytes()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !match(c, doc) {
			b.Fatal("the benchmark condition must match")
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := condition.Compile([]byte(benchCondition)); err != nil {
			b.Fatal(err)
		}
	}
}
