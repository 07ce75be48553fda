package graph

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
)

// checkTitlePatterns reports title patterns that do not parse or name a placeholder that can hold nothing
// (bad_title_pattern): when the start node has a form, a data placeholder must be a path one of its fields binds
// (or lies under, or above).
func (v *validator) checkTitlePatterns() {
	var fields []string
	if s := v.d.Start(); s != nil && s.Trigger.Kind == model.TriggerForm {
		if f := model.ParseForm(s.Trigger.Form); f != nil {
			for _, x := range f.Fields {
				fields = append(fields, x.Field)
			}
		}
	}
	check := func(where, pattern string) {
		if pattern == "" {
			return
		}
		parts, err := model.ParseTitlePattern(pattern)
		if err != nil {
			v.add(model.CodeBadTitlePattern, nil, "%s: %s", where, err)
			return
		}
		for _, p := range parts {
			if p.Placeholder == "" || model.IsBuiltinTitlePlaceholder(p.Placeholder) || fields == nil || boundPath(fields, p.Placeholder) {
				continue
			}
			v.add(model.CodeBadTitlePattern, nil, "%s: placeholder {%s} is no field of the start form (its fields: %s)",
				where, p.Placeholder, strings.Join(fields, ", "))
		}
	}
	check("title_pattern", v.d.TitlePattern)
	for _, lang := range model.Languages {
		if t := v.d.I18n.For(lang); t != nil {
			check("i18n."+lang+".title_pattern", t.TitlePattern)
		}
	}
}

// boundPath reports whether path is a field's path, lies under one (a part of an object field) or above one.
func boundPath(fields []string, path string) bool {
	for _, f := range fields {
		if f == path || strings.HasPrefix(path, f+".") || strings.HasPrefix(f, path+".") {
			return true
		}
	}
	return false
}

// Labels of form fields and options (the forms are the UI's, so the schema sees them as objects): each field may
// carry "i18n": {"zh-CN": {"label", "placeholder", "help", "text"}, "en": {...}} and each option "i18n": {lang: {"label"}}.
var (
	fieldTextLimits  = map[string]int{"label": model.MaxFieldLabelLen, "placeholder": model.MaxFieldLabelLen, "help": model.MaxFieldHelpLen, "text": model.MaxFieldHelpLen}
	optionTextLimits = map[string]int{"label": model.MaxFieldLabelLen}
)

// checkFormLabels reports malformed labels in a node's form (bad_node): unknown languages, unknown texts, texts
// that are not strings or too long.
func checkFormLabels(name, where string, raw json.RawMessage, bad func(string, ...any)) {
	if len(raw) == 0 {
		return
	}
	var f struct {
		Fields []struct {
			ID      string          `json:"id"`
			I18n    json.RawMessage `json:"i18n"`
			Options []struct {
				Value any             `json:"value"`
				I18n  json.RawMessage `json:"i18n"`
			} `json:"options"`
		} `json:"fields"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return // the form's shape is the UI's
	}
	for _, x := range f.Fields {
		at := fmt.Sprintf("node %q: %s field %q", name, where, x.ID)
		checkI18n(at, x.I18n, fieldTextLimits, bad)
		for _, o := range x.Options {
			checkI18n(fmt.Sprintf("%s option %v", at, o.Value), o.I18n, optionTextLimits, bad)
		}
	}
}

func checkI18n(at string, raw json.RawMessage, limits map[string]int, bad func(string, ...any)) {
	if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
		return
	}
	var langs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &langs); err != nil {
		bad("%s: i18n must be an object of languages (%s), each with its texts", at, strings.Join(model.Languages, ", "))
		return
	}
	known := slices.Sorted(maps.Keys(limits))
	for _, lang := range slices.Sorted(maps.Keys(langs)) {
		if !slices.Contains(model.Languages, lang) {
			bad("%s: i18n has an unknown language %q; the languages are %s", at, lang, strings.Join(model.Languages, ", "))
			continue
		}
		var texts map[string]json.RawMessage
		if err := json.Unmarshal(langs[lang], &texts); err != nil {
			bad("%s: i18n.%s must be an object with %s", at, lang, strings.Join(known, ", "))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(texts)) {
			limit, ok := limits[k]
			if !ok {
				bad("%s: i18n.%s has an unknown text %q; the texts are %s", at, lang, k, strings.Join(known, ", "))
				continue
			}
			var s string
			if err := json.Unmarshal(texts[k], &s); err != nil {
				bad("%s: i18n.%s.%s must be a string", at, lang, k)
				continue
			}
			if n := utf8.RuneCountInString(s); n > limit {
				bad("%s: i18n.%s.%s is %d characters long; at most %d are allowed", at, lang, k, n, limit)
			}
		}
	}
}
