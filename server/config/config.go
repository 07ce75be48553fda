// Package config reads Halley's settings from HALLEY_* environment variables and an optional YAML file
// (--config). The environment wins over the file. Every setting is listed once, in settings below, with its
// default and its check; docs/configuration.md documents the same list (a test keeps them in step).
package config

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbound"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/tracing"
)

// Config is every setting of a Halley process.
type Config struct {
	Addr               string
	DataDir            string
	DatabaseURL        string
	RedisURL           string
	RedisPrefix        string
	RedisCheckInterval time.Duration
	TimerLinger        time.Duration
	TimerShards        int
	TimerPartial       int
	AdminPassword      string
	Secret             string
	LogLevel           string
	LogFormat          string
	PublicURL          string
	NotifyTimeout      time.Duration
	BodyLimit          int64
	TokenTTL           time.Duration
	ShutdownTimeout    time.Duration
	IdempotencyLease   time.Duration
	DBMaxOpenConns     int
	DBMaxIdleConns     int
	DBConnMaxLifetime  time.Duration
	DBTimerConns       int
	DBStepCache        int
	DBStmtCache        int
	DBGroupWorkers     int
	DBGroupOverlap     bool
	PluginDir          string
	// PluginWorkDir holds the plugin runs' working directories (HALLEY_PLUGIN_WORK_DIR, outside the data dir
	// by default: the sandbox closes the data dir to the plugin uids) and PluginLogDir their logs, in the data
	// dir. Like DataDir and PluginDir they are absolute once Load returns.
	PluginWorkDir      string
	PluginLogDir       string
	PluginMaxSize      int64
	PluginWorkers      int
	PluginOutputCap    int
	RetentionDays      int
	TrustedProxies     []string
	FormFrameAncestors []string
	OutboundAllow      outbound.Allow
	DBWait             time.Duration

	// InstanceRetention: finished instances older than this are archived and deleted; 0 keeps them forever.
	InstanceRetention time.Duration
	RetentionSweep    time.Duration
	RetentionBatch    int
	RetentionDuty     float64
	// ArchiveDir is absolute once Load returns (default <data dir>/archive).
	ArchiveDir string
	// Attachments (service/attachments): where their bytes live ("database" or "dir"), the directory (absolute
	// once Load returns, default <data dir>/attachments) and the largest upload.
	AttachmentStorage string
	AttachmentDir     string
	AttachmentMaxSize int64
	// OTLPEndpoint is HALLEY_OTLP_ENDPOINT: where spans are exported over OTLP/HTTP; "" = tracing off.
	OTLPEndpoint string

	// Plugin sandbox (plugin.SandboxConfig; its work root is PluginWorkDir).
	PluginPython       string
	PluginUID          int
	PluginGID          int
	PluginAllowRoot    bool
	PluginWarm         bool
	PluginAddressSpace int64
	PluginProcesses    int64
	PluginFileSize     int64
	PluginOpenFiles    int64
	PluginCPUSeconds   int64
	PluginCgroup       string

	// File is the YAML file the settings were read from ("" when none), absolute: the sandbox closes it to
	// plugins.
	File string
	// AuditRetention is how long audit entries are kept (0 = forever).
	AuditRetention time.Duration
	// TriggerRateLimit is API trigger calls a second per client IP (0 = no limit).
	TriggerRateLimit float64
	// HashConcurrency bounds concurrent bcrypt work (0 = the number of CPUs).
	HashConcurrency int

	// AdminPasswordDefaulted is true when HALLEY_ADMIN_PASSWORD was not set (the bootstrap then warns loudly).
	AdminPasswordDefaulted bool
	// PublicURLDefaulted is true when HALLEY_PUBLIC_URL was unset and PublicURL was derived from Addr.
	PublicURLDefaulted bool
	// SecretGenerated is true when HALLEY_SECRET was unset and the secret was generated and kept in the data dir.
	SecretGenerated bool
}

// Setting describes one configuration value.
type Setting struct {
	Env     string // HALLEY_...
	Key     string // YAML key
	Default string
	Doc     string
	set     func(c *Config, v string) error
}

// Settings lists every setting, in documentation order.
func Settings() []Setting { return settings }

// redisPrefixPattern: what HALLEY_REDIS_PREFIX may hold. Braces are refused because the scheduler puts its keys
// under one {hash tag} after the prefix; a brace in the prefix would move them to another Cluster slot.
var redisPrefixPattern = regexp.MustCompile(`^[A-Za-z0-9:_.-]{1,64}$`)

var settings = []Setting{
	{"HALLEY_ADDR", "addr", "127.0.0.1:8080", "Listen address (host:port).", func(c *Config, v string) error {
		if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
			return fmt.Errorf("must be host:port, e.g. 127.0.0.1:8080 (got %q)", v)
		}
		c.Addr = v
		return nil
	}},
	{"HALLEY_DATA_DIR", "data_dir", "./data", "Folder for the SQLite file, the generated secret, the local plugin cache and (by default) the archive.", func(c *Config, v string) error {
		if v == "" {
			return errors.New("must not be empty")
		}
		c.DataDir = v
		return nil
	}},
	{"HALLEY_DATABASE_URL", "database_url", "", "mysql://user:pass@host:3306/db (production) or sqlite:///path.db; unset = SQLite file in the data dir.", func(c *Config, v string) error {
		if _, _, err := store.ParseURL(v, "x"); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "database URL: "))
		}
		c.DatabaseURL = v
		return nil
	}},
	{"HALLEY_REDIS_URL", "redis_url", "", "redis://[:password@]host:6379/0 for the shared timer scheduler and job locks, or a Redis Cluster: redis+cluster://[:password@]host1:7000,host2:7001,host3:7002 (rediss:// and rediss+cluster:// for TLS; docs/operations.md); unset = in-process scheduler (single node).", func(c *Config, v string) error {
		if v != "" {
			if _, err := redisconn.Parse(v); err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), "redis URL: "))
			}
		}
		c.RedisURL = v
		return nil
	}},
	{"HALLEY_REDIS_PREFIX", "redis_prefix", "halley:", "Prefix of every Redis key and pub/sub channel Halley uses (timers, job locks, wake-ups, login attempts), so that several deployments can share one Redis; give each its own. The wake-up channel also names the Redis database.", func(c *Config, v string) error {
		if !redisPrefixPattern.MatchString(v) {
			return fmt.Errorf("must be 1 to 64 letters, digits or any of : _ . - (no braces: they would change the Redis Cluster hash slot), got %q", v)
		}
		c.RedisPrefix = v
		return nil
	}},
	{"HALLEY_REDIS_CHECK_INTERVAL", "redis_check_interval", "5s", "How often Halley checks that Redis still holds the timers (a sentinel key); when Redis lost its data (FLUSHALL, a restart without persistence) every pending timer is re-armed from the database at that check.", durationSetter(func(c *Config, d time.Duration) { c.RedisCheckInterval = d }, 100*time.Millisecond)},
	{"HALLEY_TIMER_LINGER", "timer_linger", "0s", "While timers fall due faster than one per this interval, the scheduler waits this long between pops so that they are fired together, several per transaction, instead of one transaction each; a timer is at most this much later for it. Off (0s) by default: a 1M-timer run with 10ms fell far behind (docs/benchmarks.md).", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Second {
			return fmt.Errorf("must be a duration from 0 to 1s, e.g. 10ms (got %q)", v)
		}
		c.TimerLinger = d
		return nil
	}},
	{"HALLEY_TIMER_PARTIAL_HANDLERS", "timer_partial_handlers", "2", "Handlers that may fire partial batches of due timers (fewer than a full batch of 256) at once, of the 8 per replica: while that many run, the next pop waits for one of them, so that timers falling due one after another are fired several per transaction. A backlog (full batches) uses all 8. 8 turns the limit off (docs/scheduler.md).", intSetter(func(c *Config, n int64) { c.TimerPartial = int(n) }, 1, 8)},
	{"HALLEY_TIMER_SHARDS", "timer_shards", "1", "Sorted sets the Redis timer index is split into, each under its own hash tag, so that a Redis Cluster spreads the timers over its masters (e.g. 8 to 16 for 3 masters); every replica pops every shard. 1 on a single Redis. Changing it across a restart loses no timer (docs/scheduler.md).", intSetter(func(c *Config, n int64) { c.TimerShards = int(n) }, 1, scheduler.MaxShards)},
	{"HALLEY_ADMIN_PASSWORD", "admin_password", "admin", "Password of user admin, created on first start when no user exists (the default logs a loud warning, and admin must choose a new password at the first sign-in).", func(c *Config, v string) error {
		if v == "" || len(v) > 72 {
			return errors.New("must be 1 to 72 bytes")
		}
		c.AdminPassword = v
		return nil
	}},
	{"HALLEY_SECRET", "secret", "", "Signs bearer tokens and callback URLs; at least 32 characters. Unset = generated once and kept in <data_dir>/secret. Share it across replicas.", func(c *Config, v string) error {
		if v != "" && len(v) < 32 {
			return errors.New("must be at least 32 characters")
		}
		c.Secret = v
		return nil
	}},
	{"HALLEY_LOG_LEVEL", "log_level", "info", "debug, info, warn or error.", func(c *Config, v string) error {
		switch strings.ToLower(v) {
		case "debug", "info", "warn", "error":
			c.LogLevel = strings.ToLower(v)
			return nil
		}
		return fmt.Errorf("must be one of debug, info, warn, error (got %q)", v)
	}},
	{"HALLEY_LOG_FORMAT", "log_format", "text", "text or json.", func(c *Config, v string) error {
		if v != "text" && v != "json" {
			return fmt.Errorf("must be text or json (got %q)", v)
		}
		c.LogFormat = v
		return nil
	}},
	{"HALLEY_OTLP_ENDPOINT", "otlp_endpoint", "", "OpenTelemetry collector's OTLP/HTTP base URL (e.g. http://otel-collector:4318; spans go to <url>/v1/traces unless the URL has a path). Unset = tracing off. The standard OTEL_* variables (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_HEADERS...) apply; see docs/operations.md, Tracing.", func(c *Config, v string) error {
		if v == "" {
			c.OTLPEndpoint = ""
			return nil
		}
		if _, err := tracing.EndpointURL(v); err != nil {
			return fmt.Errorf("must be an http:// or https:// URL such as http://otel-collector:4318 (got %q)", v)
		}
		c.OTLPEndpoint = v
		return nil
	}},
	{"HALLEY_PUBLIC_URL", "public_url", "", "Base URL business systems reach Halley at, used in callback URLs (e.g. https://halley.example.com); unset = http://<addr>.", func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
			return fmt.Errorf("must start with http:// or https:// (got %q)", v)
		}
		c.PublicURL = strings.TrimRight(v, "/")
		return nil
	}},
	{"HALLEY_BODY_LIMIT", "body_limit", "1048576", "Largest accepted request body in bytes (413 beyond); plugin uploads have their own limit.", intSetter(func(c *Config, n int64) { c.BodyLimit = n }, 1024, 1<<30)},
	{"HALLEY_TOKEN_TTL", "token_ttl", "12h", "Lifetime of a login token.", durationSetter(func(c *Config, d time.Duration) { c.TokenTTL = d }, time.Minute)},
	{"HALLEY_IDEMPOTENCY_LEASE", "idempotency_lease", "1m", "After this long in flight, an Idempotency-Key whose request got no answer (its process died) is looked into by a retry: on the routes that change an instance the retry gets the committed work's result, or runs the request if nothing was committed. Longer than any request takes.", durationSetter(func(c *Config, d time.Duration) { c.IdempotencyLease = d }, time.Second)},
	{"HALLEY_NOTIFY_TIMEOUT", "notify_timeout", "10s", "How long one attempt to hand a notification to a channel (SMTP relay, IM robot, webhook) may take; a claimed delivery is leased for 3 times as long, then another replica may try it.", durationSetter(func(c *Config, d time.Duration) { c.NotifyTimeout = d }, time.Second)},
	{"HALLEY_SHUTDOWN_TIMEOUT", "shutdown_timeout", "30s", "How long SIGTERM waits for in-flight requests and jobs.", durationSetter(func(c *Config, d time.Duration) { c.ShutdownTimeout = d }, time.Second)},
	{"HALLEY_DB_WAIT", "db_wait", "60s", "At start, how long to wait for the database to accept connections (retrying with back-off, each attempt logged) before giving up; 0s = one attempt. /healthz answers meanwhile and /readyz says 503 until the migrations are done.", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("must be a duration of 0s or more, like 60s or 5m (got %q)", v)
		}
		c.DBWait = d
		return nil
	}},
	{"HALLEY_DB_MAX_OPEN_CONNS", "db_max_open_conns", "0", "Connection pool size; 0 = 64 for MySQL, 8 for SQLite.", intSetter(func(c *Config, n int64) { c.DBMaxOpenConns = int(n) }, 0, 10000)},
	{"HALLEY_DB_MAX_IDLE_CONNS", "db_max_idle_conns", "0", "Idle connections kept; 0 = the pool size.", intSetter(func(c *Config, n int64) { c.DBMaxIdleConns = int(n) }, 0, 10000)},
	{"HALLEY_DB_TIMER_CONNS", "db_timer_conns", "8", "MySQL: connections of the pool kept for firing timers (at most half of it): steps hold the rest, so a timer storm or a step load never makes the other wait for a connection; 0 = none kept apart.", intSetter(func(c *Config, n int64) { c.DBTimerConns = int(n) }, 0, 10000)},
	{"HALLEY_DB_GROUP_WORKERS", "db_group_workers", "0", "Group-commit transactions that may run at once: concurrent steps of different instances share one transaction, and fewer at once makes larger groups. 0 = one per two cores Halley may use (GOMAXPROCS), at least 1 and at most 8; more helps only where the database has cores to spare and answers slowly (a remote one).", intSetter(func(c *Config, n int64) { c.DBGroupWorkers = int(n) }, 0, 256)},
	{"HALLEY_DB_GROUP_OVERLAP", "db_group_overlap", "1", "1 lets one more group transaction than HALLEY_DB_GROUP_WORKERS start while the others wait for the database, once as many steps have queued as each of them holds: the cores work on the next group while the database runs the last, and groups keep their size. 0 = never more than HALLEY_DB_GROUP_WORKERS at once.", boolSetter(func(c *Config, b bool) { c.DBGroupOverlap = b })},
	{"HALLEY_DB_STEP_CACHE", "db_step_cache", "4096", "MySQL: running instances whose rows are kept in memory from their last step, so that their next step skips its lock read; the rows are checked by their revision when written, so several replicas may share the database. About 2-4 KB each (an instance whose rows take more than 64 KB is not kept); 0 = off.", intSetter(func(c *Config, n int64) { c.DBStepCache = int(n) }, 0, 1000000)},
	{"HALLEY_DB_STMT_CACHE", "db_stmt_cache", "128", "MariaDB: step-group statements each of two connections beside the pool keeps prepared, so that the database parses a recurring group's statement once instead of at every group (its values go in binary). A text is prepared the second time it comes; the least recently used is closed beyond this. MariaDB holds ~0.5 MB for each: ~135 MB of the database server's memory a replica at 128, and 2 x this of its max_prepared_stmt_count (16382 by default, shared by all its clients). 128 ran 7 % more steps a second at 16 clients with 9 % less of MariaDB's CPU a step; 64 kept too few of the texts to gain. 0 = off.", intSetter(func(c *Config, n int64) { c.DBStmtCache = int(n) }, 0, 4096)},
	{"HALLEY_DB_CONN_MAX_LIFETIME", "db_conn_max_lifetime", "30m", "Recycle connections after this long.", durationSetter(func(c *Config, d time.Duration) { c.DBConnMaxLifetime = d }, time.Second)},
	{"HALLEY_PLUGIN_DIR", "plugin_dir", "", "This replica's local cache of plugin files (under sha256/, fetched from the database on first use and checked against their hash; no sharing or backup needed). Plugin files of earlier releases found here (<name>/<version>/<sha256>) are imported into the database at start. Unset = <data_dir>/plugins.", func(c *Config, v string) error {
		c.PluginDir = v
		return nil
	}},
	{"HALLEY_PLUGIN_MAX_SIZE", "plugin_max_size", "10485760", "Largest plugin upload in bytes (413 beyond). The file is stored in the database in one transaction, in 1 MiB rows: keep it in the tens of MiB.", intSetter(func(c *Config, n int64) { c.PluginMaxSize = n }, 1024, 1<<31)},
	{"HALLEY_PLUGIN_WORKERS", "plugin_workers", "8", "Plugin runs executed at once by this process.", intSetter(func(c *Config, n int64) { c.PluginWorkers = int(n) }, 1, 1024)},
	{"HALLEY_PLUGIN_OUTPUT_CAP", "plugin_output_cap", "1048576", "Bytes of stdout and of stderr kept per plugin run; the rest is discarded.", intSetter(func(c *Config, n int64) { c.PluginOutputCap = int(n) }, 1024, 1<<30)},
	{"HALLEY_PLUGIN_PYTHON", "plugin_python", "python3", "Interpreter of runtime=python plugins: a name looked up on the plugins' PATH (not Halley's own, which may hold shims such as pyenv's) or an absolute path. Resolved at start; the plugin uids must be able to execute it (every folder on its path searchable by others).", func(c *Config, v string) error {
		if v == "" {
			return errors.New("must not be empty")
		}
		if strings.Contains(v, "/") && !filepath.IsAbs(v) {
			return fmt.Errorf("must be a name looked up on the plugins' PATH or an absolute path (got %q)", v)
		}
		c.PluginPython = v
		return nil
	}},
	{"HALLEY_PLUGIN_WORK_DIR", "plugin_work_dir", "", "Parent of the per-run working directories, where each run's copy of its plugin file is executed: reachable by the plugin uids, not mounted noexec, outside the data dir; unset = <system temp dir>/halley-plugins.", func(c *Config, v string) error {
		c.PluginWorkDir = v
		return nil
	}},
	{"HALLEY_PLUGIN_UID", "plugin_uid", "61000", "First uid plugins run as: each run in flight gets its own, from this uid to this + HALLEY_PLUGIN_WORKERS - 1 (no passwd entry needed). Keep the range for Halley's plugins, one range per Halley process on a host.", intSetter(func(c *Config, n int64) { c.PluginUID = int(n) }, 0, 1<<31-1)},
	{"HALLEY_PLUGIN_GID", "plugin_gid", "61000", "Group every plugin run has (and no supplementary groups).", intSetter(func(c *Config, n int64) { c.PluginGID = int(n) }, 0, 1<<31-1)},
	{"HALLEY_PLUGIN_WARM", "plugin_warm", "1", "1 forks python runs from a warm interpreter per HALLEY_PLUGIN_PYTHON (a fork server started with Halley's sandbox capabilities; each run a fresh child confined as a spawned run is, before the plugin is imported); 0 starts a fresh interpreter for every run.", boolSetter(func(c *Config, b bool) { c.PluginWarm = b })},
	{"HALLEY_PLUGIN_ALLOW_ROOT", "plugin_allow_root", "0", "1 lets plugins run as root where Halley would have to (it runs as root and cannot switch to the plugin uid, or HALLEY_PLUGIN_UID is 0); with 0 such runs are refused, and Halley says so at start.", boolSetter(func(c *Config, b bool) { c.PluginAllowRoot = b })},
	{"HALLEY_PLUGIN_ADDRESS_SPACE", "plugin_address_space", "536870912", "Virtual memory per plugin process in bytes (RLIMIT_AS; also memory.max of the run's cgroup where the memory controller is available); 0 = no limit. Go binaries reserve about 650 MiB at start: they need 1073741824.", intSetter(func(c *Config, n int64) { c.PluginAddressSpace = n }, 0, 1<<50)},
	{"HALLEY_PLUGIN_PROCESSES", "plugin_processes", "128", "Processes and threads per plugin run (RLIMIT_NPROC of the run's own uid; pids.max of its cgroup where available); 0 = no limit.", intSetter(func(c *Config, n int64) { c.PluginProcesses = n }, 0, 1<<22)},
	{"HALLEY_PLUGIN_FILE_SIZE", "plugin_file_size", "67108864", "Largest file a plugin may write, in bytes (RLIMIT_FSIZE); 0 = no limit.", intSetter(func(c *Config, n int64) { c.PluginFileSize = n }, 0, 1<<50)},
	{"HALLEY_PLUGIN_OPEN_FILES", "plugin_open_files", "256", "Open files per plugin process (RLIMIT_NOFILE); 0 = Halley's own limit.", intSetter(func(c *Config, n int64) { c.PluginOpenFiles = n }, 0, 1<<20)},
	{"HALLEY_PLUGIN_CPU_SECONDS", "plugin_cpu_seconds", "600", "CPU seconds per plugin process (RLIMIT_CPU; the plugin is killed past them, whatever its timeout); 0 = no limit.", intSetter(func(c *Config, n int64) { c.PluginCPUSeconds = n }, 0, 1<<31)},
	{"HALLEY_PLUGIN_CGROUP", "plugin_cgroup", "", "cgroup v2 folder in which each plugin run gets a leaf of its own, killed whole at the run's end (memory.max and pids.max too when the folder enables those controllers); unset = Halley's own cgroup; off = none.", func(c *Config, v string) error {
		if v != "" && v != "off" && !filepath.IsAbs(v) {
			return fmt.Errorf("must be an absolute path or off (got %q)", v)
		}
		c.PluginCgroup = v
		return nil
	}},
	{"HALLEY_OUTBOUND_ALLOW", "outbound_allow", "", "Comma-separated CIDRs, IPs and host names (*.corp.example for a whole domain) that webhooks and notification channels (SMTP relays included) may reach although they are loopback, link-local, private or otherwise not public; unset = public addresses only.", func(c *Config, v string) error {
		a, err := outbound.ParseAllow(v)
		if err != nil {
			return err
		}
		c.OutboundAllow = a
		return nil
	}},
	{"HALLEY_TRUSTED_PROXIES", "trusted_proxies", "", "Comma-separated IPs/CIDRs of reverse proxies whose X-Forwarded-For is trusted for the client IP; unset = none (the TCP peer is the client).", func(c *Config, v string) error {
		c.TrustedProxies = nil
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if _, err := netip.ParsePrefix(p); err != nil {
				if _, err := netip.ParseAddr(p); err != nil {
					return fmt.Errorf("%q is neither an IP nor a CIDR", p)
				}
			}
			c.TrustedProxies = append(c.TrustedProxies, p)
		}
		return nil
	}},
	{"HALLEY_FORM_FRAME_ANCESTORS", "form_frame_ancestors", "", "Comma-separated origins (https://portal.example.com, https://*.example.com, 'self') that may show the start-form pages (/start/...) in an iframe; unset = no site may frame any page of Halley (frame-ancestors 'none').", func(c *Config, v string) error {
		c.FormFrameAncestors = nil
		for _, o := range strings.Split(v, ",") {
			o = strings.TrimSpace(o)
			if o == "" {
				continue
			}
			if o != "'self'" && !frameOriginRe.MatchString(o) {
				return fmt.Errorf("%q is not an origin like https://portal.example.com, https://*.example.com or 'self'", o)
			}
			c.FormFrameAncestors = append(c.FormFrameAncestors, o)
		}
		return nil
	}},
	{"HALLEY_RETENTION_DAYS", "retention_days", "30", "Days plugin logs and expired queue items are kept.", intSetter(func(c *Config, n int64) { c.RetentionDays = int(n) }, 1, 3650)},
	{"HALLEY_INSTANCE_RETENTION", "instance_retention", "0", "Finished instances (with their tasks, history, plugin runs and waits) older than this are written to the archive and deleted from the database, leaving a tombstone (GET answers 410 archived); e.g. 8760h for a year. 0 keeps them forever. A template overrides it with \"options\":{\"retention\":\"720h\"}.", func(c *Config, v string) error {
		d, err := model.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("must be 0 (keep forever) or a duration such as 8760h (got %q)", v)
		}
		c.InstanceRetention = d.Std()
		return nil
	}},
	{"HALLEY_INSTANCE_RETENTION_SWEEP", "instance_retention_sweep", "1h", "How often the retention sweep looks for instances to archive (one replica at a time sweeps, under a lease in the database).", durationSetter(func(c *Config, d time.Duration) { c.RetentionSweep = d }, time.Second)},
	{"HALLEY_INSTANCE_RETENTION_BATCH", "instance_retention_batch", "100", "Instances archived per batch: one gzip member in the archive and one short delete transaction each.", intSetter(func(c *Config, n int64) { c.RetentionBatch = int(n) }, 1, 1000)},
	{"HALLEY_INSTANCE_RETENTION_DUTY", "instance_retention_duty", "0.1", "Share of the time the retention sweep works: after each batch it pauses so that batches take at most this fraction, leaving the database to the engine. 0.1 archives a day's 20,000 finished instances in minutes and a year's backlog within days; raise it (up to 1, no pause) to catch up faster.", func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0.01 || f > 1 {
			return fmt.Errorf("must be a number from 0.01 to 1 (got %q)", v)
		}
		c.RetentionDuty = f
		return nil
	}},
	{"HALLEY_ARCHIVE_DIR", "archive_dir", "", "Where the retention sweep writes archived instances, one gzipped JSON-lines file per day (YYYY-MM-DD.jsonl.gz); with several replicas it must be storage they all reach (a NAS mount). Unset = <data_dir>/archive. Made absolute at start.", func(c *Config, v string) error {
		c.ArchiveDir = v
		return nil
	}},
	{"HALLEY_ATTACHMENT_STORAGE", "attachment_storage", "database", "Where uploaded attachments keep their bytes: database (in the database, in 1 MiB rows, as plugin files: every replica reads them, nothing else to share or back up) or dir (files under HALLEY_ATTACHMENT_DIR named by their SHA-256: with several replicas that must be storage they all reach, a NAS mount).", func(c *Config, v string) error {
		if v != "database" && v != "dir" {
			return fmt.Errorf("must be database or dir (got %q)", v)
		}
		c.AttachmentStorage = v
		return nil
	}},
	{"HALLEY_ATTACHMENT_DIR", "attachment_dir", "", "Attachment files when HALLEY_ATTACHMENT_STORAGE=dir (<sha256[:2]>/<sha256>), and the temporary files of uploads in progress with either storage. Unset = <data_dir>/attachments. Made absolute at start.", func(c *Config, v string) error {
		c.AttachmentDir = v
		return nil
	}},
	{"HALLEY_ATTACHMENT_MAX_SIZE", "attachment_max_size", "20971520", "Largest attachment upload in bytes (413 beyond); the default, 20 MiB, fits a phone's photos.", intSetter(func(c *Config, n int64) { c.AttachmentMaxSize = n }, 1024, 1<<32)},
	{"HALLEY_AUDIT_RETENTION", "audit_retention", "8760h", "How long audit log entries are kept (GET /api/v1/audit); older ones are purged hourly, oldest first. 0 = keep forever.", func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || (d > 0 && d < time.Hour) {
			return fmt.Errorf("must be 0 (forever) or a duration of at least 1h, like 8760h for a year (got %q)", v)
		}
		c.AuditRetention = d
		return nil
	}},
	{"HALLEY_TRIGGER_RATE_LIMIT", "trigger_rate_limit", "20", "API trigger calls (/api/v1/trigger/...) allowed per second from one client IP, in bursts of twice that: shared by every replica through Redis when HALLEY_REDIS_URL is set (each replica alone without it, or while Redis does not answer); beyond, 429 with Retry-After. 0 = no limit.", func(c *Config, v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || n > 1e6 {
			return fmt.Errorf("must be a number of calls a second from 0 (no limit) to 1000000, like 20 or 0.5 (got %q)", v)
		}
		c.TriggerRateLimit = n
		return nil
	}},
	{"HALLEY_PASSWORD_HASH_CONCURRENCY", "password_hash_concurrency", "0", "Password checks and hashes (bcrypt: sign-ins, password changes) run at once; more wait up to 2s, then get 503 busy with Retry-After. 0 = the number of CPUs.", intSetter(func(c *Config, n int64) { c.HashConcurrency = int(n) }, 0, 1024)},
}

// frameOriginRe is an origin a Content-Security-Policy frame-ancestors source may name: http(s), a host (its
// first label may be "*"), an optional port.
var frameOriginRe = regexp.MustCompile(`^https?://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?$`)

func intSetter(set func(*Config, int64), min, max int64) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min || n > max {
			return fmt.Errorf("must be a whole number from %d to %d (got %q)", min, max, v)
		}
		set(c, n)
		return nil
	}
}

func boolSetter(set func(*Config, bool)) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("must be 0 or 1 (got %q)", v)
		}
		set(c, b)
		return nil
	}
}

func durationSetter(set func(*Config, time.Duration), min time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < min {
			return fmt.Errorf("must be a duration of at least %s, like 30s or 12h (got %q)", min, v)
		}
		set(c, d)
		return nil
	}
}

// Load reads the YAML file at path (when not empty), then the environment (getenv, usually os.Getenv), applies
// defaults and checks every value. Errors name the setting and say why.
func Load(path string, getenv func(string) string) (*Config, error) {
	vals := map[string]string{}
	from := map[string]string{}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		var y map[string]any
		dec := yaml.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&y); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
		known := map[string]bool{}
		for _, s := range settings {
			known[s.Key] = true
		}
		for k, v := range y {
			if !known[k] {
				return nil, fmt.Errorf("config file %s: unknown setting %q", path, k)
			}
			switch t := v.(type) {
			case map[string]any, []any:
				return nil, fmt.Errorf("config file %s: %s must be a single value", path, k)
			case nil:
				vals[k] = ""
			default:
				vals[k] = fmt.Sprint(t)
			}
			from[k] = fmt.Sprintf("%s (in %s)", k, path)
		}
	}
	_, adminSet := vals["admin_password"]
	for _, s := range settings {
		if v := getenv(s.Env); v != "" {
			vals[s.Key] = v
			from[s.Key] = s.Env
			if s.Key == "admin_password" {
				adminSet = true
			}
		}
	}
	c := &Config{File: path}
	for _, s := range settings {
		v, ok := vals[s.Key]
		if !ok {
			v = s.Default
		}
		if err := s.set(c, v); err != nil {
			name := from[s.Key]
			if name == "" {
				name = s.Env
			}
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	c.AdminPasswordDefaulted = !adminSet
	if err := c.absolutePaths(from); err != nil {
		return nil, err
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Addr
		c.PublicURLDefaulted = true
	}
	return c, nil
}

// LocalURL is where a command run beside Halley (`halley templates load`) reaches the server this configuration
// describes: HALLEY_PUBLIC_URL when it is set, else http://HALLEY_ADDR with an unspecified host (0.0.0.0, ::, or
// none) replaced by 127.0.0.1, since one cannot connect to "any address".
func (c *Config) LocalURL() string {
	if !c.PublicURLDefaulted {
		return c.PublicURL
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return "http://" + c.Addr
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// absolutePaths makes every path setting absolute, once, against the working directory, and derives the folders
// inside the data dir. Everything downstream then sees the same folders whatever its own working directory is:
// the plugin runner refuses a relative work root, and a plugin process runs in a directory of its own.
func (c *Config) absolutePaths(from map[string]string) error {
	abs := func(key, env string, p *string) error {
		a, err := filepath.Abs(*p)
		if err != nil {
			name := from[key]
			if name == "" {
				name = env
			}
			return fmt.Errorf("%s: unable to make %q absolute: %v", name, *p, err)
		}
		*p = a
		return nil
	}
	if err := abs("data_dir", "HALLEY_DATA_DIR", &c.DataDir); err != nil {
		return err
	}
	if c.PluginDir == "" {
		c.PluginDir = filepath.Join(c.DataDir, "plugins")
	} else if err := abs("plugin_dir", "HALLEY_PLUGIN_DIR", &c.PluginDir); err != nil {
		return err
	}
	if c.PluginWorkDir == "" {
		// Not in the data dir: the sandbox closes that to the plugin uids, which must enter their run directories.
		c.PluginWorkDir = filepath.Join(os.TempDir(), "halley-plugins")
	}
	if err := abs("plugin_work_dir", "HALLEY_PLUGIN_WORK_DIR", &c.PluginWorkDir); err != nil {
		return err
	}
	c.PluginLogDir = filepath.Join(c.DataDir, "plugin-logs")
	// The archive dir is named in log lines and read back by `halley archive show`, from whatever directory that
	// runs in.
	if c.ArchiveDir == "" {
		c.ArchiveDir = filepath.Join(c.DataDir, "archive")
	} else if err := abs("archive_dir", "HALLEY_ARCHIVE_DIR", &c.ArchiveDir); err != nil {
		return err
	}
	if c.AttachmentDir == "" {
		c.AttachmentDir = filepath.Join(c.DataDir, "attachments")
	} else if err := abs("attachment_dir", "HALLEY_ATTACHMENT_DIR", &c.AttachmentDir); err != nil {
		return err
	}
	if c.File != "" {
		if err := abs("", "--config", &c.File); err != nil {
			return err
		}
	}
	// A relative SQLite file in the database URL (sqlite://halley.db) is a path setting too.
	if u, err := url.Parse(c.DatabaseURL); err == nil && u.Scheme == "sqlite" {
		p := u.Host + u.Path
		if err := abs("database_url", "HALLEY_DATABASE_URL", &p); err != nil {
			return err
		}
		c.DatabaseURL = "sqlite://" + p
	}
	return nil
}

// PathAttrs are the folders and files Halley writes to, as slog attributes, for the log line at start.
func (c *Config) PathAttrs() []any {
	db := filepath.Join(c.DataDir, "halley.db")
	if c.DatabaseURL != "" {
		db = "(not a file)"
		if u, err := url.Parse(c.DatabaseURL); err == nil && u.Scheme == "sqlite" {
			db = u.Host + u.Path
		}
	}
	return []any{"data_dir", c.DataDir, "database", db, "plugin_dir", c.PluginDir, "plugin_work_dir", c.PluginWorkDir,
		"plugin_log_dir", c.PluginLogDir, "archive_dir", c.ArchiveDir,
		"attachment_storage", c.AttachmentStorage, "attachment_dir", c.AttachmentDir}
}

// EnsureSecret makes sure c.Secret is set: when HALLEY_SECRET is unset it reads <data_dir>/secret, creating it
// with 32 random bytes (mode 0600) on first start.
func (c *Config) EnsureSecret() error {
	if c.Secret != "" {
		return nil
	}
	if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
		return fmt.Errorf("HALLEY_DATA_DIR: unable to create %s: %v", c.DataDir, err)
	}
	p := filepath.Join(c.DataDir, "secret")
	b, err := os.ReadFile(p)
	if err == nil {
		s := strings.TrimSpace(string(b))
		if len(s) < 32 {
			return fmt.Errorf("HALLEY_SECRET: %s holds fewer than 32 characters; delete it to generate a new one", p)
		}
		c.Secret = s
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("HALLEY_SECRET: unable to read %s: %v", p, err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	s := hex.EncodeToString(raw)
	if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
		return fmt.Errorf("HALLEY_SECRET: unable to write %s: %v", p, err)
	}
	c.Secret = s
	c.SecretGenerated = true
	return nil
}
