package graph_test

import (
	"strings"
	"testing"
)

// withTop adds top-level fields to a definition.
func withTop(raw, fields string) string {
	return strings.Replace(raw, `{"nodes"`, `{`+fields+`, "nodes"`, 1)
}

const formStart = `{"id": "start", "type": "start", "trigger": {"kind": "form", "form": {"kind": "components", "fields": [
	{"id": "days", "type": "number", "label": "Days", "field": "days"},
	{"id": "kind", "type": "select", "label": "Type", "field": "leave.type",
	 "i18n": {"zh-CN": {"label": "类型"}, "en": {"label": "Type"}},
	 "options": [{"value": "annual", "label": "Annual", "i18n": {"zh-CN": {"label": "年假"}}}]}]}}}`

func formDef(nodes ...string) string {
	all := append([]string{formStart}, nodes...)
	all = append(all, end)
	return def(all, edge("start", "end"))
}

func TestValidateLabels(t *testing.T) {
	runCases(t, []validationCase{
		{"labels in both languages", withTop(def([]string{
			node("start", "start", `"trigger": {"kind": "manual"}`, `"i18n": {"zh-CN": {"name": "发起"}, "en": {"name": "Apply"}}`),
			end}, edge("start", "end")),
			`"i18n": {"zh-CN": {"name": "请假", "description": "年假、病假"}, "en": {"name": "Leave"}}`), nil},
		{"form field and option labels", formDef(), nil},
		{"unknown node language", def([]string{
			node("start", "start", `"trigger": {"kind": "manual"}`, `"i18n": {"fr": {"name": "Départ"}}`), end}, edge("start", "end")),
			[]want{{code: "bad_node", nodes: []string{"start"}}}},
		{"unknown template language", withTop(linear(), `"i18n": {"zh": {"name": "请假"}}`),
			[]want{{code: "bad_definition"}}},
		{"node label too long", def([]string{
			node("start", "start", `"trigger": {"kind": "manual"}`, `"i18n": {"en": {"name": "`+strings.Repeat("x", 201)+`"}}`), end}, edge("start", "end")),
			[]want{{code: "bad_node", nodes: []string{"start"}}}},
		{"form field: unknown language", strings.Replace(formDef(), `"en": {"label": "Type"}`, `"en-GB": {"label": "Type"}`, 1),
			[]want{{code: "bad_node", nodes: []string{"start"}, msg: `unknown language "en-GB"`}}},
		{"form field: unknown text", strings.Replace(formDef(), `"en": {"label": "Type"}`, `"en": {"title": "Type"}`, 1),
			[]want{{code: "bad_node", nodes: []string{"start"}, msg: `unknown text "title"`}}},
		{"form field: label too long", strings.Replace(formDef(), `"en": {"label": "Type"}`, `"en": {"label": "`+strings.Repeat("长", 201)+`"}`, 1),
			[]want{{code: "bad_node", nodes: []string{"start"}, msg: "201 characters"}}},
		{"option: not a string", strings.Replace(formDef(), `{"label": "年假"}`, `{"label": 3}`, 1),
			[]want{{code: "bad_node", nodes: []string{"start"}, msg: "must be a string"}}},
		{"approval form labels checked too", linear(approval("a", `"form": {"fields": [{"id": "x", "field": "x", "i18n": {"de": {"label": "X"}}}]}`)),
			[]want{{code: "bad_node", nodes: []string{"a"}}}},
	})
}

func TestValidateTitlePatterns(t *testing.T) {
	runCases(t, []validationCase{
		{"builtins and form fields", withTop(formDef(),
			`"title_pattern": "{initiator} · {days} days ({leave.type}, {date}, {template})", "i18n": {"zh-CN": {"title_pattern": "{initiator} · {days} 天{leave}"}}`), nil},
		{"any path without a start form", withTop(linear(), `"title_pattern": "{initiator}: {a.b-c_d}"`), nil},
		{"unknown placeholder", withTop(formDef(), `"title_pattern": "{initiator} · {dayz}"`),
			[]want{{code: "bad_title_pattern", msg: "{dayz} is no field of the start form"}}},
		{"unknown placeholder in a language", withTop(formDef(), `"i18n": {"en": {"title_pattern": "{who}"}}`),
			[]want{{code: "bad_title_pattern", msg: "i18n.en.title_pattern"}}},
		{"malformed placeholder", withTop(linear(), `"title_pattern": "{a b}"`),
			[]want{{code: "bad_title_pattern", msg: "placeholder {a b}"}}},
		{"unclosed placeholder", withTop(linear(), `"title_pattern": "{initiator"`),
			[]want{{code: "bad_title_pattern", msg: "not closed"}}},
		{"stray brace", withTop(linear(), `"title_pattern": "a } b"`),
			[]want{{code: "bad_title_pattern", msg: "closes no placeholder"}}},
		{"escaped braces", withTop(linear(), `"title_pattern": "{{x}} {initiator}"`), nil},
		{"too long", withTop(linear(), `"title_pattern": "`+strings.Repeat("x", 501)+`"`), []want{{code: "bad_definition"}}},
	})
}
