package template

import (
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// TitleValues are what a title pattern's builtin placeholders read.
type TitleValues struct {
	Initiator string    // the initiator's display name
	Template  string    // the template's name (in the pattern's language)
	Date      time.Time // the start; rendered as a date in its location
}

// RenderTitle renders a title pattern (model.ParseTitlePattern) against the values and the request's data (a
// JSON object). A missing or null value renders empty; a list renders its items joined by ", " (files by their
// names); an object renders empty. The result is plain text on one line: control characters and runs of spaces
// become one space, it is trimmed, and cut to model.MaxTitleLen characters. It is never interpreted as markup —
// the UI shows it as text. A pattern that does not parse renders "" (publishing refuses such patterns).
func RenderTitle(pattern string, v TitleValues, data []byte) string {
	parts, err := model.ParseTitlePattern(pattern)
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Placeholder {
		case "":
			b.WriteString(p.Text)
		case model.TitleInitiator:
			b.WriteString(v.Initiator)
		case model.TitleTemplate:
			b.WriteString(v.Template)
		case model.TitleDate:
			if !v.Date.IsZero() {
				b.WriteString(v.Date.Format(time.DateOnly))
			}
		default:
			// A placeholder path holds only letters, digits, '_', '-' and dots: no gjson syntax.
			b.WriteString(titleValue(gjson.GetBytes(data, p.Placeholder)))
		}
	}
	return tidyTitle(b.String())
}

func titleValue(r gjson.Result) string {
	switch r.Type {
	case gjson.String:
		return r.Str
	case gjson.Number:
		// The number as written, unless it is a whole number written with a fraction or exponent.
		if f := r.Float(); strings.ContainsAny(r.Raw, ".eE") && f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
		return r.Raw
	case gjson.True:
		return "✓"
	case gjson.False:
		return "✗"
	case gjson.JSON:
		if !r.IsArray() {
			return ""
		}
		var items []string
		for _, it := range r.Array() {
			s := ""
			if it.IsObject() {
				s = it.Get("name").String() // a file: its name
			} else if !it.IsArray() {
				s = titleValue(it)
			}
			if s != "" {
				items = append(items, s)
			}
		}
		return strings.Join(items, ", ")
	}
	return "" // null, missing
}

// tidyTitle puts the title on one line, trims it and cuts it to model.MaxTitleLen characters.
func tidyTitle(s string) string {
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	if r := []rune(s); len(r) > model.MaxTitleLen {
		s = strings.TrimSpace(string(r[:model.MaxTitleLen-1])) + "…"
	}
	return s
}

// HasTitlePattern reports whether the definition gives instances a title pattern (plain or in a language).
func HasTitlePattern(d *model.Definition) bool {
	if d.TitlePattern != "" {
		return true
	}
	for _, lang := range model.Languages {
		if t := d.I18n.For(lang); t != nil && t.TitlePattern != "" {
			return true
		}
	}
	return false
}

// RenderTitles renders the definition's title pattern for an instance: the plain title (from title_pattern, else
// the first language's pattern) and the title in each language (from that language's pattern, else the plain
// one; {template} reads the template's name in that language, else name). ok is false when the definition has
// no pattern.
func RenderTitles(d *model.Definition, name string, v TitleValues, data []byte) (plain string, byLang map[string]string, ok bool) {
	if !HasTitlePattern(d) {
		return "", nil, false
	}
	byLang = make(map[string]string, len(model.Languages))
	for _, lang := range model.Languages {
		pattern, vl := d.TitlePattern, v
		vl.Template = name
		if t := d.I18n.For(lang); t != nil {
			if t.TitlePattern != "" {
				pattern = t.TitlePattern
			}
			if t.Name != "" {
				vl.Template = t.Name
			}
		}
		if pattern == "" {
			continue
		}
		byLang[lang] = RenderTitle(pattern, vl, data)
		if plain == "" && d.TitlePattern == "" {
			plain = byLang[lang]
		}
	}
	if d.TitlePattern != "" {
		v.Template = name
		plain = RenderTitle(d.TitlePattern, v, data)
	}
	return plain, byLang, true
}
