package server

import (
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

// openapiPlugins documents plugins and their runs (plugins.go).
var openapiPlugins = []apiOp{
	{Method: "POST", Path: apiBase + "/plugins", Tag: "plugins", Sum: "Upload a plugin version (multipart: file, name, runtime, timeout...)",
		Desc: "Multipart fields: file (required), name, runtime (python or binary), timeout (1s to 1h, default 60s), network (on or off, " +
			"default on), warm (true, false, 1 or 0, default true: python runs are forked from the warm runtime; false spawns a fresh " +
			"interpreter per run; binaries always spawn). 400 invalid_runtime, invalid_timeout, invalid_network; 422 invalid_warm.",
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
	Network  string          `json:"network"`
	Warm     bool            `json:"warm"`
	Versions []*model.Plugin `json:"versions"`
}
