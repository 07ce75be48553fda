package model

import "encoding/json"

// Labels in two languages (API.md "Additions of 2026-11-28"): a definition, its nodes and the fields and options
// of its forms may carry their texts in zh-CN and en beside the plain ones, as an "i18n" object with one object of
// texts per language: "i18n": {"zh-CN": {"name": "请假"}, "en": {"name": "Leave"}}. People read their language's
// text and, where it has none, the plain one. The languages are the UI's; any other key is refused.

// The languages labels may be written in (BCP 47 tags): those of Languages.
const (
	LangEN   = "en"
	LangZhCN = "zh-CN"
)

// Lengths of labels, in characters.
const (
	MaxTemplateNameLen        = 200
	MaxTemplateDescriptionLen = 2000
	MaxTitlePatternLen        = 500
	MaxFieldLabelLen          = 200
	MaxFieldHelpLen           = 1000
)

// NodeTexts are a node's texts in one language.
type NodeTexts struct {
	// The node's name in this language.
	Name string `json:"name,omitempty" jsonschema:"maxLength=200"`
}

// NodeI18n holds a node's texts per language.
type NodeI18n struct {
	// Simplified Chinese.
	ZhCN *NodeTexts `json:"zh-CN,omitempty"`
	// English.
	En *NodeTexts `json:"en,omitempty"`
}

// IsZero reports whether no language is given.
func (x NodeI18n) IsZero() bool { return x.ZhCN == nil && x.En == nil }

// Name returns the node's name in lang, or "" when it has none there.
func (x NodeI18n) Name(lang string) string {
	if t := pick(lang, x.ZhCN, x.En); t != nil {
		return t.Name
	}
	return ""
}

// DefinitionTexts are a template's texts in one language.
type DefinitionTexts struct {
	// The template's name in this language.
	Name string `json:"name,omitempty" jsonschema:"maxLength=200"`
	// The template's description in this language.
	Description string `json:"description,omitempty" jsonschema:"maxLength=2000"`
	// The title pattern in this language (as title_pattern).
	TitlePattern string `json:"title_pattern,omitempty" jsonschema:"maxLength=500"`
}

// DefinitionI18n holds a template's texts per language.
type DefinitionI18n struct {
	// Simplified Chinese.
	ZhCN *DefinitionTexts `json:"zh-CN,omitempty"`
	// English.
	En *DefinitionTexts `json:"en,omitempty"`
}

// IsZero reports whether no language is given.
func (x DefinitionI18n) IsZero() bool { return x.ZhCN == nil && x.En == nil }

// For returns the texts in lang (nil when none).
func (x DefinitionI18n) For(lang string) *DefinitionTexts { return pick(lang, x.ZhCN, x.En) }

// TemplateLabels are a template's name and description per language, as template answers carry them ("i18n").
type TemplateLabels map[string]TemplateTexts

// TemplateTexts are a template's name and description in one language.
type TemplateTexts struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
}

// Labels returns the template names and descriptions the definition carries, nil when none.
func (x DefinitionI18n) Labels() TemplateLabels {
	var out TemplateLabels
	for _, lang := range Languages {
		t := x.For(lang)
		if t == nil || (t.Name == "" && t.Description == "") {
			continue
		}
		if out == nil {
			out = TemplateLabels{}
		}
		out[lang] = TemplateTexts{Name: t.Name, Description: t.Description}
	}
	return out
}

func pick[T any](lang string, zh, en *T) *T {
	switch lang {
	case LangZhCN:
		return zh
	case LangEN:
		return en
	}
	return nil
}

// TemplateLabelsOf reads the template names and descriptions a definition document carries (nil when none or
// when it does not read): what the templates row keeps for listings.
func TemplateLabelsOf(def json.RawMessage) TemplateLabels {
	var probe struct {
		I18n DefinitionI18n `json:"i18n"`
	}
	if json.Unmarshal(def, &probe) != nil {
		return nil
	}
	return probe.I18n.Labels()
}
