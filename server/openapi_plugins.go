package server

import (
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

// openapiPlugins documents plugins and their runs (plugins.go).
var openapiPlugins = []apiOp{
	{Method: "POST", Path: apiBase + "/plugins", Tag: "plugins", Sum: "Upload a plugin version (multipart: file, name, runtime, timeout...)",
		Auth: authAdmin, RawBody: "multipart/form-data", Status: 201, Resp: model.Plugin{}},
	{Method: "GET", Path: apiBase + "/plugins", Tag: "plugins", Sum: "List plugins", Auth: authAdmin, Resp: List[*model.Plugin]{}},
	{Method: "GET", Path: apiBase + "/plugins/sandbox", Tag: "plugins", Sum: "What confines plugin runs on this replica", Auth: authAdmin,
		Resp: plugin.SandboxReport{}},
	{Method: "GET", Path: apiBase + "/plugins/:name", Tag: "plugins", Sum: "A plugin's latest version and all its versions", Auth: authAdmin,
		Resp: pluginDoc{}},
	{Method: "GET", Path: apiBase + "/plugins/:name/runs", Tag: "plugins", Sum: "A plugin's runs", Auth: authAdmin,
		Query: []string{"instance_id", "date", "cursor", "limit"}, Resp: List[*model.PluginRun]{}},
	{Method: "GET", Path: apiBase + "/plugin-runs/:id/log", Tag: "plugins", Sum: "A run's output (every attempt)", Auth: authAdmin, RespType: "text/plain"},
	{Method: "POST", Path: apiBase + pluginResultRoute, Tag: "plugins", Sum: "Finish an async plugin run",
		Desc: "409 run_closed when the run has finished, timed out, or its node is no longer active.", Auth: authOptional, Query: []string{"token"},
		Body: resultRequest{}, Resp: model.PluginRun{}},
}

type pluginDoc struct {
	Name     string          `json:"name"`
	Version  int             `json:"version"`
	Runtime  string          `json:"runtime"`
	SHA256   string          `json:"sha256"`
	Size     int64           `json:"size"`
	Timeout  string          `json:"timeout"`
	Network  bool            `json:"network"`
	Versions []*model.Plugin `json:"versions"`
}
