package plugin

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
)

// SandboxConfig says how plugin runs are confined (docs/plugins.md, "Isolation"). NewSandbox takes the values as
// given and refuses impossible ones: DefaultSandboxConfig returns the documented defaults to start from. A zero
// limit means no limit.
type SandboxConfig struct {
	// UID is the first uid plugin runs get; each run in flight has its own, from UID to UID+UIDs-1, so runs
	// cannot signal, trace or read each other, RLIMIT_NPROC counts per run, and where no cgroup is available
	// everything a run left behind can still be killed by its uid. GID is every run's group.
	UID, GID int
	UIDs     int
	// AllowRoot lets plugins run as root where they otherwise would be refused: Halley runs as root and cannot
	// switch to UID, or UID is 0.
	AllowRoot bool

	AddressSpace int64 // bytes of virtual memory per process (RLIMIT_AS; memory.max of the run's cgroup)
	Processes    int64 // processes and threads of a run (RLIMIT_NPROC of its uid; pids.max of its cgroup)
	FileSize     int64 // bytes of the largest file a plugin may write (RLIMIT_FSIZE)
	OpenFiles    int64 // open files per process (RLIMIT_NOFILE)
	CPUSeconds   int64 // CPU seconds per process (RLIMIT_CPU)

	// Cgroup is the cgroup v2 folder in which each run gets a leaf of its own: "" = Halley's own cgroup,
	// "off" = no cgroups.
	Cgroup string
	// PrivatePaths are Halley's own files and folders (data dir, plugin dir, SQLite file, secret, config file),
	// absolute: NewSandbox takes every permission for "others" off them (and for the group, when it is GID) and
	// checks that no plugin uid can read them.
	PrivatePaths []string
	// WorkRoot is the parent of the runs' working directories, absolute (required); it must not be inside a
	// private path and must allow executing files (the composition root's default: <temp dir>/halley-plugins).
	WorkRoot string
	Python   string // interpreter of python plugins: a name looked up on Path, or an absolute path [python3]
	Path     string // PATH given to plugins [DefaultPath]
	Logger   *slog.Logger
}

// maxID is the largest uid or gid a plugin run may get (uid_t is 32 bits; -1 means "unchanged" to the kernel).
const maxID = 1<<31 - 1

// validate refuses a configuration no host could run: the host's own limits (a uid it cannot switch to, no
// cgroup) are found by NewSandbox's probes and reported, not refused.
func (c SandboxConfig) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("plugin sandbox: "+format, args...)) }
	if c.UIDs < 1 {
		bad("UIDs is %d: every run in flight needs a uid of its own, so at least 1", c.UIDs)
	}
	if c.UID < 0 || c.UID > maxID || c.UIDs >= 1 && c.UID > maxID-(c.UIDs-1) {
		bad("the uid range from %d for %d runs does not fit 0-%d", c.UID, c.UIDs, maxID)
	}
	if c.GID < 0 || c.GID > maxID {
		bad("GID %d is not in 0-%d", c.GID, maxID)
	}
	for _, l := range []struct {
		name string
		v    int64
	}{{"AddressSpace", c.AddressSpace}, {"Processes", c.Processes}, {"FileSize", c.FileSize}, {"OpenFiles", c.OpenFiles}, {"CPUSeconds", c.CPUSeconds}} {
		if l.v < 0 {
			bad("%s is %d: a limit is 0 (none) or more", l.name, l.v)
		}
	}
	if c.Cgroup != "" && c.Cgroup != "off" && !filepath.IsAbs(c.Cgroup) {
		bad("Cgroup %q must be an absolute path, off or empty", c.Cgroup)
	}
	if c.WorkRoot == "" || !filepath.IsAbs(c.WorkRoot) {
		bad("WorkRoot %q must be an absolute path", c.WorkRoot)
	}
	for _, p := range c.PrivatePaths {
		if !filepath.IsAbs(p) {
			bad("private path %q must be absolute", p)
		}
	}
	if strings.Contains(c.Python, "/") && !filepath.IsAbs(c.Python) {
		bad("Python %q must be a name looked up on the plugins' PATH or an absolute path", c.Python)
	}
	return errors.Join(errs...)
}

// Defaults of the sandbox (HALLEY_PLUGIN_* in docs/configuration.md).
const (
	DefaultPluginUID          = 61000
	DefaultPluginAddressSpace = 512 << 20
	DefaultPluginProcesses    = 128
	DefaultPluginFileSize     = 64 << 20
	DefaultPluginOpenFiles    = 256
	DefaultPluginCPUSeconds   = 600
)

// DefaultSandboxConfig returns the documented defaults for a Halley with workers plugin workers.
func DefaultSandboxConfig(workers int) SandboxConfig {
	return SandboxConfig{UID: DefaultPluginUID, GID: DefaultPluginUID, UIDs: max(workers, 1),
		AddressSpace: DefaultPluginAddressSpace, Processes: DefaultPluginProcesses, FileSize: DefaultPluginFileSize,
		OpenFiles: DefaultPluginOpenFiles, CPUSeconds: DefaultPluginCPUSeconds}
}

// Names of the protections in SandboxReport, in the order they are listed.
const (
	ProtectUser        = "user"             // runs have a uid and gid of their own, not Halley's and not root
	ProtectPrivate     = "private_files"    // the data dir, database file, secret... are unreadable to plugins
	ProtectProcess     = "halley_process"   // /proc/<halley>/environ and memory are unreadable to plugins
	ProtectEnvironment = "environment"      // nothing of Halley's environment is passed on
	ProtectLimits      = "rlimits"          // address space, processes, file size, open files, CPU seconds
	ProtectCgroup      = "cgroup"           // a cgroup v2 leaf per run
	ProtectLeftovers   = "leftovers_killed" // what a run started dies with it, setsid daemons included
	ProtectNetwork     = "network_off"      // plugins uploaded with network=off run without a network
	ProtectUnixSockets = "no_unix_sockets"  // ... and cannot open a unix socket (the host's, in its file system)
	ProtectPrivateTmp  = "private_tmp"      // each run has its own /tmp, /var/tmp, /dev/shm and IPC namespace
)

// Protection is one line of the report: whether it is in force, with what, or why not.
type Protection struct {
	Name    string `json:"name"`
	InForce bool   `json:"in_force"`
	Detail  string `json:"detail"`
}

// SandboxReport is what NewSandbox found the host allows; GET /api/v1/plugins/sandbox shows it.
type SandboxReport struct {
	// PluginsRun is false when runs are refused (Refused says why): they would run as root.
	PluginsRun  bool         `json:"plugins_run"`
	Refused     string       `json:"refused,omitempty"`
	UIDs        string       `json:"uids"` // "61000-61007", or Halley's own uid
	GID         int          `json:"gid"`
	WorkDir     string       `json:"work_dir"`
	Python      string       `json:"python"`                 // the interpreter python plugins run with
	PythonError string       `json:"python_error,omitempty"` // why python plugins cannot run, when they cannot
	Protections []Protection `json:"protections"`
	HalleyUID   int          `json:"halley_uid"`
}

// Protection returns the named line of the report.
func (r SandboxReport) Protection(name string) Protection {
	for _, p := range r.Protections {
		if p.Name == name {
			return p
		}
	}
	return Protection{Name: name, Detail: "not checked"}
}

// Report returns what is in force.
func (s *Sandbox) Report() SandboxReport {
	r := s.report
	r.Protections = append([]Protection(nil), s.report.Protections...)
	return r
}

// LogReport writes the report to lg: one line per protection, warnings for those not in force, an error when
// plugins are refused or python plugins cannot run.
func (s *Sandbox) LogReport(lg *slog.Logger) {
	r := s.report
	for _, p := range r.Protections {
		if p.InForce {
			lg.Info("plugin sandbox: in force", "protection", p.Name, "detail", p.Detail)
		} else {
			lg.Warn("plugin sandbox: NOT in force", "protection", p.Name, "why", p.Detail)
		}
	}
	if r.Refused != "" {
		lg.Error("plugin runs are REFUSED: "+r.Refused, "halley_uid", r.HalleyUID)
	}
	if r.PythonError != "" {
		lg.Error("python plugins cannot run: "+r.PythonError, "python", r.Python)
	}
	lg.Info("plugin sandbox", "uids", r.UIDs, "gid", r.GID, "work_dir", r.WorkDir, "python", r.Python, "plugins_run", r.PluginsRun)
}

func (c SandboxConfig) uidRange() string {
	if c.UIDs <= 1 {
		return fmt.Sprint(c.UID)
	}
	return fmt.Sprintf("%d-%d", c.UID, c.UID+c.UIDs-1)
}
