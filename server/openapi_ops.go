package server

import "github.com/halley-bpm/halley/model"

// openapiOps documents the operational routes (health, metrics, the document itself) and the public schemas.
var openapiOps = []apiOp{
	{Method: "GET", Path: "/healthz", Tag: "operations", Sum: "Liveness: 200 while the process runs", Auth: authPublic, Resp: statusDoc{}},
	{Method: "GET", Path: "/readyz", Tag: "operations", Sum: "Readiness: the database, the scheduler and Redis answer",
		Desc: "503 with the same body naming the failing checks.", Auth: authPublic, Resp: readyDoc{}, Also: []int{503}},
	{Method: "GET", Path: "/metrics", Tag: "operations", Sum: "Prometheus metrics (text exposition format)", Auth: authPublic,
		RespType: "text/plain"},
	{Method: "GET", Path: apiDocsPath, Tag: "operations", Sum: "This document, rendered for people (HTML)", Auth: authPublic, RespType: "text/html"},
	{Method: "GET", Path: apiBase + "/openapi.json", Tag: "operations", Sum: "This OpenAPI 3.1 document", Auth: authPublic, Resp: map[string]any{}},
	{Method: "GET", Path: apiBase + "/schemas/definition.json", Tag: "templates", Sum: "The JSON Schema of a template definition",
		Auth: authPublic, RespType: "application/schema+json"},
	{Method: "GET", Path: formFramePath, Tag: "forms", Sum: "The sandboxed frame an HTML form template runs in (HTML)", Auth: authPublic,
		RespType: "text/html"},
	{Method: "GET", Path: apiBase + "/audit", Tag: "operations", Sum: "The audit log: admin changes, jumps, terminates",
		Auth: authAdmin, Query: []string{"actor", "action", "from", "to", "cursor", "limit"}, Resp: List[*model.AuditEntry]{}},
}

type statusDoc struct {
	Status string `json:"status"`
}

type readyDoc struct {
	Status string            `json:"status" jsonschema:"enum=ready,enum=not ready"`
	Checks map[string]string `json:"checks" jsonschema:"description=ok or error: ... by dependency (database / scheduler / redis)"`
}
