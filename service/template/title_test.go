package template_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

func TestRenderTitle(t *testing.T) {
	day := time.Date(2026, 11, 28, 23, 30, 0, 0, time.FixedZone("CST", 8*3600))
	vals := template.TitleValues{Initiator: "王 Bob", Template: "年假", Date: day}
	data := `{"days":5,"half":2.50,"whole":3.0,"leave":{"type":"annual"},"note":null,"ok":true,"no":false,
		"tags":["a","b",null,3],"files":[{"id":"x","name":"scan.pdf"},{"id":"y"}],"obj":{"a":1},"html":"<b>x</b>",
		"multi":"line one\nline\ttwo"}`
	cases := []struct{ pattern, want string }{
		{"{initiator} · {days} 天年假", "王 Bob · 5 天年假"},
		{"{initiator} · {days} days of annual leave", "王 Bob · 5 days of annual leave"},
		{"{template} {date}", "年假 2026-11-28"}, // the date in the start's own location
		{"{leave.type}", "annual"},
		{"{ days }", "5"},
		{"{half}/{whole}", "2.50/3"},
		{"{missing} x {leave.missing} {note}", "x"}, // missing and null render empty, never <nil>
		{"{ok} {no}", "✓ ✗"},
		{"{tags}", "a, b, 3"},
		{"{files}", "scan.pdf"},
		{"{obj}", ""},
		{"{html}", "<b>x</b>"}, // text, kept as typed: the UI shows titles as text
		{"{multi}", "line one line two"},
		{"{{literal}} {days}}}", "{literal} 5}"},
		{"plain", "plain"},
		{"{broken", ""}, // publishing refuses it; rendering gives nothing rather than a half title
	}
	for _, c := range cases {
		if got := template.RenderTitle(c.pattern, vals, []byte(data)); got != c.want {
			t.Errorf("RenderTitle(%q) = %q, want %q", c.pattern, got, c.want)
		}
	}
	if got := template.RenderTitle("{initiator}{date}", template.TitleValues{}, nil); got != "" {
		t.Errorf("empty values rendered %q", got)
	}
}

func TestRenderTitleIsLengthLimited(t *testing.T) {
	long := strings.Repeat("假", 300)
	got := template.RenderTitle("{v}", template.TitleValues{}, []byte(`{"v":"`+long+`"}`))
	if n := utf8.RuneCountInString(got); n != model.MaxTitleLen || !strings.HasSuffix(got, "…") {
		t.Fatalf("title of %d characters (%q...), want %d ending in …", n, string([]rune(got)[:5]), model.MaxTitleLen)
	}
	if !utf8.ValidString(got) {
		t.Fatal("cut inside a character")
	}
}

func TestRenderTitlesPerLanguage(t *testing.T) {
	var d model.Definition
	raw := `{"nodes":[],"edges":[],"title_pattern":"{initiator}: {template}, {days} d",
		"i18n":{"zh-CN":{"name":"请假申请","title_pattern":"{initiator} · {days} 天年假"},"en":{"name":"Leave request"}}}`
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	plain, by, ok := template.RenderTitles(&d, "Leave", template.TitleValues{Initiator: "Alice"}, []byte(`{"days":2}`))
	if !ok || plain != "Alice: Leave, 2 d" || by["zh-CN"] != "Alice · 2 天年假" || by["en"] != "Alice: Leave request, 2 d" {
		t.Fatalf("got %q %q ok=%v", plain, by, ok)
	}
	// Only per-language patterns: the plain title is the first language's.
	d.TitlePattern = ""
	plain, by, _ = template.RenderTitles(&d, "Leave", template.TitleValues{Initiator: "Alice"}, []byte(`{"days":2}`))
	if plain != "Alice · 2 天年假" || len(by) != 1 {
		t.Fatalf("got %q %q", plain, by)
	}
	d.I18n = model.DefinitionI18n{}
	if _, _, ok := template.RenderTitles(&d, "Leave", template.TitleValues{}, nil); ok {
		t.Fatal("a definition without a pattern rendered a title")
	}
}
