package server

import (
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/graph"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/trigger"
)

// openapiTemplates documents templates, conditions, forms and API triggers (templates.go, triggers.go).
var openapiTemplates = []apiOp{
	{Method: "POST", Path: apiBase + "/templates/validate", Tag: "templates", Sum: "Validate a definition: errors and warnings, nothing stored",
		Auth: authUser, Body: draftRequest{}, Resp: graph.Result{}},
	{Method: "GET", Path: apiBase + "/templates", Tag: "templates", Sum: "List templates", Auth: authUser, Query: []string{"cursor", "limit"},
		Resp: List[*template.View]{}},
	{Method: "GET", Path: apiBase + "/templates/:key", Tag: "templates", Sum: "One template with its draft and latest version", Auth: authUser,
		Resp: template.View{}},
	{Method: "GET", Path: apiBase + "/templates/:key/versions/:n", Tag: "templates", Sum: "One published version", Auth: authUser,
		Resp: model.TemplateVersion{}},
	{Method: "GET", Path: apiBase + "/templates/:key/versions/:n/diagram", Tag: "templates", Sum: "A version as a Mermaid flowchart",
		Desc:  "`lang=zh-CN` or `lang=en` draws it in that language: node names from their i18n labels, conditions as people read them with the forms' field labels (`天数 > 3 或 领导审批.上报 = 是`), the edge words; absent, the plain names and the short condition text. Another lang is 400 invalid_language.",
		Query: []string{"lang"}, Auth: authUser, RespType: "text/plain"},
	{Method: "POST", Path: apiBase + "/templates", Tag: "templates", Sum: "Create a template", Desc: "422 with the validation errors in details.",
		Auth: authAdmin, Body: template.CreateRequest{}, Status: 201, Resp: template.View{}},
	{Method: "PUT", Path: apiBase + "/templates/:key/draft", Tag: "templates", Sum: "Save the draft", Auth: authAdmin, Body: draftRequest{},
		Resp: template.View{}},
	{Method: "POST", Path: apiBase + "/templates/:key/publish", Tag: "templates", Sum: "Publish the draft as a new version", Auth: authAdmin,
		Status: 201, Resp: publishedDoc{}},
	{Method: "GET", Path: apiBase + "/templates/:key/trigger-log", Tag: "templates", Sum: "The last calls of the template's start trigger",
		Auth: authAdmin, Query: []string{"limit"}, Resp: itemsDoc[*model.TriggerLogEntry]{}},
	{Method: "POST", Path: apiBase + "/conditions/evaluate", Tag: "templates", Sum: "Evaluate a condition against a context",
		Auth: authUser, Body: evaluateRequest{}, Resp: resultDoc{}},
	{Method: "GET", Path: apiBase + "/forms/:key", Tag: "forms", Sum: "A template's public start form",
		Desc: "Public forms need no sign-in; others need a bearer token.", Auth: authOptional, Resp: trigger.FormView{}},
	{Method: "POST", Path: apiBase + "/forms/:key/submit", Tag: "forms", Sum: "Submit a start form: starts an instance", Auth: authOptional,
		Body: map[string]any{}, Status: 201, Resp: instanceViewDoc},
	{Method: "ANY", Path: apiBase + "/trigger/sync/:module/:function", Tag: "triggers",
		Sum:  "Call an API trigger and wait for the instance to end",
		Desc: "`?wait=` bounds the wait (202 with the instance id when it runs longer). Authenticated as the template's trigger says (header token, password, IP list); limited per client IP.",
		Auth: authOptional, Query: []string{"wait"}, Body: map[string]any{}, Resp: trigger.CallResult{}, Also: []int{202}},
	{Method: "ANY", Path: apiBase + "/trigger/async/:module/:function", Tag: "triggers", Sum: "Call an API trigger: starts an instance",
		Auth: authOptional, Body: map[string]any{}, Resp: trigger.CallResult{}, Also: []int{202}},
}

type publishedDoc struct {
	Key         string    `json:"key"`
	Version     int       `json:"version"`
	PublishedAt time.Time `json:"published_at"`
	PublishedBy string    `json:"published_by"`
}

type resultDoc struct {
	Result bool `json:"result"`
}

// itemsDoc is a list without paging.
type itemsDoc[T any] struct {
	Items []T `json:"items"`
}
