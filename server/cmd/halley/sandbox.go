package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/store"
)

// pluginSandbox builds the plugin sandbox from the configuration: it detects what the host allows, closes
// Halley's own files to the plugin uids and logs what is in force (GET /api/v1/plugins/sandbox shows the same).
// The paths are absolute: config.Load made them so.
func pluginSandbox(cfg *config.Config, lg *slog.Logger) (*plugin.Sandbox, error) {
	private := []string{cfg.DataDir, cfg.PluginDir, cfg.ArchiveDir, filepath.Join(cfg.DataDir, "secret")}
	if dialect, dsn, err := store.ParseURL(cfg.DatabaseURL, cfg.DataDir); err == nil && dialect == store.SQLite {
		db, _, _ := strings.Cut(dsn, "?")
		private = append(private, db, db+"-wal", db+"-shm")
	}
	if cfg.File != "" {
		private = append(private, cfg.File)
	}
	sb, err := plugin.NewSandbox(plugin.SandboxConfig{
		UID: cfg.PluginUID, GID: cfg.PluginGID, UIDs: cfg.PluginWorkers, AllowRoot: cfg.PluginAllowRoot,
		AddressSpace: cfg.PluginAddressSpace, Processes: cfg.PluginProcesses, FileSize: cfg.PluginFileSize,
		OpenFiles: cfg.PluginOpenFiles, CPUSeconds: cfg.PluginCPUSeconds, Cgroup: cfg.PluginCgroup,
		PrivatePaths: private, WorkRoot: cfg.PluginWorkDir, Python: cfg.PluginPython, Logger: lg,
	})
	if err != nil {
		return nil, fmt.Errorf("HALLEY_PLUGIN_*: %w", err)
	}
	sb.LogReport(lg)
	return sb, nil
}
