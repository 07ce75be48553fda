package server

import (
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
)

var instanceViewDoc = engine.InstanceView{}

// openapiInstances documents instances, tasks, waits and messages (instances.go).
var openapiInstances = []apiOp{
	{Method: "POST", Path: apiBase + "/instances", Tag: "instances", Sum: "Start an instance of a template",
		Desc: "403 trigger_required for templates whose start trigger is not manual; 409 correlation_taken.", Auth: authUser,
		Body: startRequest{}, Status: 201, Resp: instanceViewDoc},
	{Method: "POST", Path: apiBase + "/instances/linear", Tag: "instances", Sum: "Start a dynamic linear process (no template)", Auth: authUser,
		Body: linearRequest{}, Status: 201, Resp: instanceViewDoc},
	{Method: "GET", Path: apiBase + "/instances", Tag: "instances", Sum: "List instances",
		Query: []string{"status", "template", "initiator", "correlation_id", "cursor", "limit"}, Auth: authUser, Resp: List[*model.Instance]{}},
	{Method: "GET", Path: apiBase + "/instances/:id", Tag: "instances", Sum: "One instance with its nodes and open tasks", Auth: authUser, Resp: instanceViewDoc},
	{Method: "GET", Path: apiBase + "/instances/:id/history", Tag: "instances", Sum: "The instance's history, oldest first", Auth: authUser,
		Resp: itemsDoc[model.HistoryEvent]{}},
	{Method: "GET", Path: apiBase + "/instances/:id/diagram", Tag: "instances", Sum: "The instance as a Mermaid flowchart with node states",
		Desc:  "`lang=zh-CN` or `lang=en` draws it in that language: node names from their i18n labels, conditions as people read them with the forms' field labels (`天数 > 3 或 领导审批.上报 = 是`), the edge words; absent, the plain names and the short condition text. Another lang is 400 invalid_language.",
		Query: []string{"lang"}, Auth: authUser, RespType: "text/plain"},
	{Method: "GET", Path: apiBase + "/instances/:id/bookmarks", Tag: "instances", Sum: "The instance's open waits", Auth: authUser,
		Resp: itemsDoc[*model.Bookmark]{}},
	{Method: "POST", Path: apiBase + "/instances/:id/terminate", Tag: "instances", Sum: "Terminate a running instance", Auth: authUser,
		Body: reasonRequest{}, Resp: instanceViewDoc},
	{Method: "POST", Path: apiBase + "/instances/:id/withdraw", Tag: "instances", Sum: "Withdraw my instance", Auth: authUser,
		Body: reasonRequest{}, Resp: instanceViewDoc},
	{Method: "POST", Path: apiBase + "/instances/:id/urge", Tag: "instances", Sum: "Urge the approvers of my running instance (催办; once per 10 minutes, 429 with Retry-After)",
		Auth: authUser, Body: urgeRequest{}, Resp: map[string]int{"tasks": 0}},
	{Method: "POST", Path: apiBase + "/instances/:id/jump", Tag: "instances", Sum: "Move a running instance to another node", Auth: authUser,
		Body: moveRequest{}, Resp: instanceViewDoc},
	{Method: "GET", Path: apiBase + "/tasks", Tag: "tasks", Sum: "List tasks (my inbox by default)",
		Query: []string{"assignee", "status", "instance_id", "cursor", "limit"}, Auth: authUser, Resp: List[*model.Task]{}},
	{Method: "GET", Path: apiBase + "/tasks/:id", Tag: "tasks", Sum: "One task", Auth: authUser, Resp: model.Task{}},
	{Method: "POST", Path: apiBase + "/tasks/:id/approve", Tag: "tasks", Sum: "Approve my task",
		Desc: "422 field_not_editable for data outside the node form's editable fields.", Auth: authUser, Body: decideRequest{}, Resp: engine.Decided{}},
	{Method: "POST", Path: apiBase + "/tasks/:id/reject", Tag: "tasks", Sum: "Reject my task", Auth: authUser, Body: decideRequest{}, Resp: engine.Decided{}},
	{Method: "POST", Path: apiBase + "/tasks/:id/transfer", Tag: "tasks", Sum: "Hand my task to someone else", Auth: authUser,
		Body: transferRequest{}, Resp: model.Task{}},
	{Method: "POST", Path: apiBase + "/tasks/:id/add-sign", Tag: "tasks", Sum: "Add signers before or after me", Auth: authUser,
		Body: addSignRequest{}, Resp: engine.AddSignResult{}},
	{Method: "POST", Path: apiBase + "/tasks/:id/return", Tag: "tasks", Sum: "Return the instance to an earlier node", Auth: authUser,
		Body: moveRequest{}, Resp: instanceViewDoc},
	{Method: "GET", Path: apiBase + "/tasks/:id/return-targets", Tag: "tasks", Sum: "The nodes my task may return to", Auth: authUser,
		Resp: returnTargetsDoc{}},
	{Method: "POST", Path: apiBase + "/tasks/:id/reclaim", Tag: "tasks", Sum: "Take back a task I decided, while the next is undecided",
		Auth: authUser, Body: decideRequest{}, Resp: model.Task{}},
	{Method: "POST", Path: apiBase + "/bookmarks/:id/resume", Tag: "instances", Sum: "Resume a wait (admins and API tokens)", Auth: authUser,
		Body: resumeRequest{}, Resp: instanceViewDoc},
	{Method: "POST", Path: apiBase + callbackRoute, Tag: "instances", Sum: "Resume a callback node's wait",
		Desc: "Authenticated by the signed `token` of the callback URL, or as an admin or API token.", Auth: authOptional, Query: []string{"token"},
		Body: map[string]any{}, Resp: instanceViewDoc},
	{Method: "POST", Path: apiBase + "/messages", Tag: "instances", Sum: "Send a message: resumes waits and starts message-triggered templates",
		Desc: "200 with the first answer for a message_id seen in the last 7 days.", Auth: authUser, Body: messageRequest{}, Status: 202,
		Resp: engine.MessageResult{}, Also: []int{200}},
	{Method: "GET", Path: apiBase + "/cc", Tag: "tasks", Sum: "Instances I was copied on", Auth: authUser, Query: []string{"cursor", "limit"},
		Resp: List[*model.CCRecord]{}},
	{Method: "POST", Path: apiBase + "/cc/:id/read", Tag: "tasks", Sum: "Mark a copy read", Auth: authUser, Resp: ccReadDoc{}},
}

type returnTargetsDoc struct {
	Items       []engine.ReturnTarget `json:"items"`
	NoInitiator bool                  `json:"no_initiator"`
}

type ccReadDoc struct {
	ID   string `json:"id"`
	Read bool   `json:"read"`
}
