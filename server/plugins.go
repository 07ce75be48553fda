package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

// SandboxReporter tells what confines plugin runs; *plugin.Sandbox is one.
type SandboxReporter interface {
	Report() plugin.SandboxReport
}

// pluginSandbox answers what the plugin sandbox of this replica has in force, and why not where it has not.
func (s *Server) pluginSandbox(c *gin.Context) {
	if s.sandbox == nil {
		c.JSON(http.StatusOK, plugin.SandboxReport{PluginsRun: true, Protections: []plugin.Protection{}})
		return
	}
	c.JSON(http.StatusOK, s.sandbox.Report())
}

// uploadPlugin stores a new version of a plugin (multipart: name, runtime, timeout, network, warm, file).
func (s *Server) uploadPlugin(c *gin.Context) {
	name := c.PostForm("name")
	if err := plugin.ValidName(name); err != nil {
		fail(c, err)
		return
	}
	runtime := plugin.Runtime(c.PostForm("runtime"))
	if err := runtime.Validate(); err != nil {
		fail(c, model.CodedError(model.EINVALID, "invalid_runtime", "runtime must be python or binary"))
		return
	}
	timeout := 60 * time.Second
	if v := c.PostForm("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > time.Hour {
			fail(c, model.CodedError(model.EINVALID, "invalid_timeout", "timeout must be a duration from 1s to 1h, like 30s"))
			return
		}
		timeout = d
	}
	network := model.NetworkOn
	switch v := c.PostForm("network"); v {
	case "", model.NetworkOn:
	case model.NetworkOff:
		network = model.NetworkOff
	default:
		fail(c, model.CodedError(model.EINVALID, "invalid_network", `network must be "on" or "off"`))
		return
	}
	warm := true
	switch v := c.PostForm("warm"); v {
	case "", "true", "1":
	case "false", "0":
		warm = false
	default:
		fail(c, model.CodedError(model.EUNPROCESSABLE, "invalid_warm", `warm must be "true", "false", "1" or "0"`))
		return
	}
	fh, err := c.FormFile("file")
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			fail(c, model.CodedError(model.ETOOLARGE, "plugin_too_large", "the plugin is larger than %d bytes", s.pluginMax))
			return
		}
		fail(c, model.CodedError(model.EINVALID, "missing_file", "send the plugin as the multipart field \"file\""))
		return
	}
	if fh.Size == 0 {
		fail(c, model.CodedError(model.EINVALID, "empty_file", "the plugin file is empty"))
		return
	}
	f, err := fh.Open()
	if err != nil {
		fail(c, err)
		return
	}
	defer f.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	sum, size, err := plugin.Hash(f, s.pluginMax)
	if err != nil {
		fail(c, err)
		return
	}
	ctx := c.Request.Context()
	p := principal(c)
	version, err := s.plugins.NextPluginVersion(ctx, p.TenantID, name)
	if err != nil {
		fail(c, err)
		return
	}
	// The file goes into the database with the version row, in one transaction: every replica can run it.
	pl := &model.Plugin{TenantID: p.TenantID, Name: name, Version: version, Runtime: string(runtime), Timeout: timeout, TimeoutStr: timeout.String(),
		SHA256: sum, Size: size, UploadedBy: p.Username, Network: network, Warm: warm}
	// Recorded in the transaction that stores the version and its file.
	err = s.record(c, model.AuditPluginUpload, name, func(ctx context.Context, e *model.AuditEntry) error {
		e.SetAfter(map[string]any{"name": pl.Name, "version": pl.Version, "runtime": pl.Runtime, "timeout": pl.TimeoutStr, "sha256": pl.SHA256, "size": pl.Size, "network": pl.Network, "warm": pl.Warm})
		return s.plugins.CreatePlugin(ctx, pl, f)
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, pl)
}

// pluginRunLog answers the log of every attempt of a plugin run as text, from the database: any replica shows
// the log of a run another replica executed.
func (s *Server) pluginRunLog(c *gin.Context) {
	logs, err := s.plugins.RunLogs(c.Request.Context(), principal(c).TenantID, c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	var b strings.Builder
	for _, l := range logs {
		b.WriteString(l.Record)
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(b.String()))
}

func (s *Server) listPlugins(c *gin.Context) {
	ps, err := s.plugins.ListPlugins(c.Request.Context(), principal(c).TenantID)
	if err != nil {
		fail(c, err)
		return
	}
	if ps == nil {
		ps = []*model.Plugin{}
	}
	c.JSON(http.StatusOK, gin.H{"items": ps, "next_cursor": ""})
}

func (s *Server) getPlugin(c *gin.Context) {
	vs, err := s.plugins.ListPluginVersions(c.Request.Context(), principal(c).TenantID, c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	if len(vs) == 0 {
		fail(c, model.CodedError(model.ENOTFOUND, "plugin_not_found", "plugin %q not found", c.Param("name")))
		return
	}
	latest := vs[0]
	c.JSON(http.StatusOK, gin.H{"name": latest.Name, "version": latest.Version, "runtime": latest.Runtime, "sha256": latest.SHA256,
		"size": latest.Size, "timeout": latest.TimeoutStr, "network": latest.Network, "warm": latest.Warm, "versions": vs})
}

func (s *Server) pluginRuns(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	f := model.RunFilter{TenantID: principal(c).TenantID, Plugin: c.Param("name"), InstanceID: c.Query("instance_id"), Page: pg}
	if d := c.Query("date"); d != "" {
		day, err := time.Parse("2006-01-02", d)
		if err != nil {
			fail(c, model.CodedError(model.EINVALID, "invalid_date", "date must be YYYY-MM-DD"))
			return
		}
		f.Day = day
	}
	runs, next, err := s.plugins.ListRuns(c.Request.Context(), f)
	if err != nil {
		fail(c, err)
		return
	}
	if runs == nil {
		runs = []*model.PluginRun{}
	}
	c.JSON(http.StatusOK, List[*model.PluginRun]{Items: runs, NextCursor: next})
}

// resultRequest is the body of POST /plugin-runs/{id}/result.
type resultRequest struct {
	Status string          `json:"status"`
	Data   json.RawMessage `json:"data"`
}

// pluginResult finishes an async plugin run; authenticated by the signed token of its result URL or an admin.
func (s *Server) pluginResult(c *gin.Context) {
	var req resultRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	run, err := s.engine.AsyncResult(c.Request.Context(), principal(c), c.Param("id"), c.Query("token"), req.Status, req.Data)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, run)
}

func isPluginUpload(c *gin.Context) bool {
	return c.Request.Method == http.MethodPost && strings.TrimSuffix(c.FullPath(), "/") == "/api/v1/plugins"
}
