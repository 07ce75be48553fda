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
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
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
	AdminPassword      string
	Secret             string
	LogLevel           string
	LogFormat          string
	PublicURL          string
	BodyLimit          int64
	TokenTTL           time.Duration
	ShutdownTimeout    time.Duration
	IdempotencyLease   time.Duration
	DBMaxOpenConns     int
	DBMaxIdleConns     int
	DBConnMaxLifetime  time.Duration
	PluginDir          string
	PluginMaxSize      int64
	PluginWorkers      int
	PluginOutputCap    int
	RetentionDays      int
	TrustedProxies     []string
	DBWait             time.Duration
	// InstanceRetention: finished instances older than this are archived and deleted; 0 keeps them forever.
	InstanceRetention time.Duration
	RetentionSweep    time.Duration
	RetentionBatch    int
	RetentionDuty     float64
	ArchiveDir        string

	// AdminPasswordDefaulted is true when HALLEY_ADMIN_PASSWORD was not set (the bootstrap then warns loudly).
	AdminPasswordDefaulted bool
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
	{"HALLEY_REDIS_URL", "redis_url", "", "redis://[:password@]host:6379/0 for the shared timer scheduler and job locks; unset = in-process scheduler (single node).", func(c *Config, v string) error {
		if v != "" {
			if _, err := redis.ParseURL(v); err != nil {
				return fmt.Errorf("not a redis:// URL: %v", err)
			}
		}
		c.RedisURL = v
		return nil
	}},
	{"HALLEY_REDIS_PREFIX", "redis_prefix", "halley:", "Prefix of every Redis key and pub/sub channel Halley uses (timers, job locks, wake-ups), so that several deployments can share one Redis; give each its own. The wake-up channel also names the Redis database.", func(c *Config, v string) error {
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
	{"HALLEY_ADMIN_PASSWORD", "admin_password", "admin", "Password of user admin, created on first start when no user exists (the default logs a loud warning).", func(c *Config, v string) error {
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
	{"HALLEY_DB_CONN_MAX_LIFETIME", "db_conn_max_lifetime", "30m", "Recycle connections after this long.", durationSetter(func(c *Config, d time.Duration) { c.DBConnMaxLifetime = d }, time.Second)},
	{"HALLEY_PLUGIN_DIR", "plugin_dir", "", "This replica's local cache of plugin files (under sha256/, fetched from the database on first use and checked against their hash; no sharing or backup needed). Plugin files of earlier releases found here (<name>/<version>/<sha256>) are imported into the database at start. Unset = <data_dir>/plugins.", func(c *Config, v string) error {
		c.PluginDir = v
		return nil
	}},
	{"HALLEY_PLUGIN_MAX_SIZE", "plugin_max_size", "10485760", "Largest plugin upload in bytes (413 beyond). The file is stored in the database in one transaction, in 1 MiB rows: keep it in the tens of MiB.", intSetter(func(c *Config, n int64) { c.PluginMaxSize = n }, 1024, 1<<31)},
	{"HALLEY_PLUGIN_WORKERS", "plugin_workers", "8", "Plugin runs executed at once by this process.", intSetter(func(c *Config, n int64) { c.PluginWorkers = int(n) }, 1, 1024)},
	{"HALLEY_PLUGIN_OUTPUT_CAP", "plugin_output_cap", "1048576", "Bytes of stdout and of stderr kept per plugin run; the rest is discarded.", intSetter(func(c *Config, n int64) { c.PluginOutputCap = int(n) }, 1024, 1<<30)},
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
}

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
	c := &Config{}
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
	if c.PluginDir == "" {
		c.PluginDir = filepath.Join(c.DataDir, "plugins")
	}
	if c.ArchiveDir == "" {
		c.ArchiveDir = filepath.Join(c.DataDir, "archive")
	}
	// The archive dir is named in log lines and read back by `halley archive show`, from whatever directory that
	// runs in: keep it absolute.
	abs, err := filepath.Abs(c.ArchiveDir)
	if err != nil {
		return nil, fmt.Errorf("HALLEY_ARCHIVE_DIR: %v", err)
	}
	c.ArchiveDir = abs
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Addr
	}
	return c, nil
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
