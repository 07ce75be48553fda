package condition

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestScanTopAgreesWithGjson checks the one-pass reader of top-level fields against gjson.Get on random
// documents whose strings are full of what makes skipping JSON hard: escaped quotes, backslash runs,
// brackets and braces, unicode escapes, and duplicate or escaped keys.
func TestScanTopAgreesWithGjson(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", `q"k`, `back\slash`, "ü", "", "0", "a.b", "x"}
	for n := range 3000 {
		doc := randomObject(rng, keys, 3)
		if !gjson.Valid(doc) {
			t.Fatalf("generated invalid JSON: %s", doc)
		}
		names := []string{}
		for _, k := range rng.Perm(len(keys))[:1+rng.IntN(len(keys))] {
			names = append(names, keys[k])
		}
		out := make([]gjson.Result, len(names))
		scanTop([]byte(doc), doc, names, out)
		root := gjson.Parse(doc)
		for i, name := range names {
			want := field(root, &splitPath(name)[0])
			if name == "a.b" { // a dotted name is one field here, which splitPath would split
				want = root.Get(gjson.Escape(name))
			}
			if out[i].Raw != want.Raw || out[i].Type != want.Type {
				t.Fatalf("doc %d %s\nfield %q: scanTop read %q, gjson %q", n, doc, name, out[i].Raw, want.Raw)
			}
		}
	}
}

func randomObject(rng *rand.Rand, keys []string, depth int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range rng.IntN(6) {
		if i > 0 {
			b.WriteByte(',')
		}
		writeSpace(rng, &b)
		b.WriteString(jsonString(keys[rng.IntN(len(keys))], rng.IntN(4) == 0))
		writeSpace(rng, &b)
		b.WriteByte(':')
		writeSpace(rng, &b)
		b.WriteString(randomValue(rng, keys, depth))
		writeSpace(rng, &b)
	}
	b.WriteByte('}')
	return b.String()
}

func randomValue(rng *rand.Rand, keys []string, depth int) string {
	switch k := rng.IntN(8); {
	case k < 2 && depth > 0:
		return randomObject(rng, keys, depth-1)
	case k < 4 && depth > 0:
		var b strings.Builder
		b.WriteByte('[')
		for i := range rng.IntN(5) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(randomValue(rng, keys, depth-1))
		}
		b.WriteByte(']')
		return b.String()
	case k < 6:
		return jsonString(randomText(rng), rng.IntN(3) == 0)
	case k == 6:
		return []string{"0", "-1.5e3", "123456789012345678901", "true", "false", "null"}[rng.IntN(6)]
	}
	return "42"
}

// randomText returns text rich in the bytes a JSON skipper must get right.
func randomText(rng *rand.Rand) string {
	pieces := []string{`"`, `\`, `\\`, `{`, `}`, `[`, `]`, `,`, `:`, "abcdefgh", "xy", "ü", "\n", " "}
	var b strings.Builder
	for range rng.IntN(20) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// jsonString quotes s as JSON; with unicode set it escapes every letter as \u00XX, so that keys and values
// also arrive escaped.
func jsonString(s string, unicode bool) string {
	if unicode {
		var b strings.Builder
		b.WriteByte('"')
		for _, r := range s {
			if r >= 'a' && r <= 'z' {
				b.WriteString(`\u00` + "0123456789abcdef"[r>>4:r>>4+1] + "0123456789abcdef"[r&15:r&15+1])
				continue
			}
			q, _ := json.Marshal(string(r))
			b.Write(q[1 : len(q)-1])
		}
		b.WriteByte('"')
		return b.String()
	}
	q, _ := json.Marshal(s)
	return string(q)
}

func writeSpace(rng *rand.Rand, b *strings.Builder) {
	if rng.IntN(3) == 0 {
		b.WriteString([]string{" ", "\n\t", "\r\n  "}[rng.IntN(3)])
	}
}
