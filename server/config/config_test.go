package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/server/config"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	c, err := config.Load("", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(wd, "data")
	if c.Addr != "127.0.0.1:8080" || c.DataDir != data || c.DatabaseURL != "" || c.RedisURL != "" || c.AdminPassword != "admin" ||
		!c.AdminPasswordDefaulted || c.BodyLimit != 1<<20 || c.TokenTTL != 12*time.Hour || c.LogLevel != "info" ||
		c.PluginDir != filepath.Join(data, "plugins") || c.PublicURL != "http://127.0.0.1:8080" || !c.PluginWarm {
		t.Fatalf("defaults: %+v", c)
	}
	if c, err := config.Load("", env(map[string]string{"HALLEY_PLUGIN_WARM": "0"})); err != nil || c.PluginWarm {
		t.Fatalf("HALLEY_PLUGIN_WARM=0: still warm, or %v", err)
	}
	if !c.DBGroupOverlap {
		t.Fatal("group overlap is off by default")
	}
	if c, err := config.Load("", env(map[string]string{"HALLEY_DB_GROUP_OVERLAP": "0"})); err != nil || c.DBGroupOverlap {
		t.Fatalf("HALLEY_DB_GROUP_OVERLAP=0: still on, or %v", err)
	}
	if _, err := config.Load("", env(map[string]string{"HALLEY_DB_GROUP_OVERLAP": "sometimes"})); err == nil {
		t.Fatal("HALLEY_DB_GROUP_OVERLAP=sometimes was accepted")
	}
	if c.RedisPrefix != "halley:" || c.DBWait != time.Minute || c.InstanceRetention != 0 || c.RetentionSweep != time.Hour ||
		c.RetentionBatch != 100 || c.RetentionDuty != 0.1 || c.TimerShards != 1 ||
		c.ArchiveDir != filepath.Join(wd, "data", "archive") {
		t.Fatalf("long-running defaults: prefix %q, db wait %v, retention %v, sweep %v, archive %q", c.RedisPrefix, c.DBWait,
			c.InstanceRetention, c.RetentionSweep, c.ArchiveDir)
	}
	if c, err := config.Load("", env(map[string]string{"HALLEY_TIMER_SHARDS": "8",
		"HALLEY_REDIS_URL": "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"})); err != nil || c.TimerShards != 8 {
		t.Fatalf("HALLEY_TIMER_SHARDS=8 on a cluster: %d, %v", c.TimerShards, err)
	}
	c, err = config.Load("", env(map[string]string{"HALLEY_INSTANCE_RETENTION": "720h", "HALLEY_ARCHIVE_DIR": "rel/archive",
		"HALLEY_REDIS_PREFIX": "tenant-b:", "HALLEY_DB_WAIT": "0s"}))
	if err != nil || c.InstanceRetention != 720*time.Hour || c.ArchiveDir != filepath.Join(wd, "rel", "archive") ||
		c.RedisPrefix != "tenant-b:" || c.DBWait != 0 {
		t.Fatalf("long-running settings: %+v, %v", c, err)
	}
}

// TestPathsAreAbsolute: every path setting may be relative (the default ./data is); Load makes it absolute
// against the working directory, once, so the plugin runner (which refuses a relative work root) and the store
// see the same folders whatever their own working directory.
func TestPathsAreAbsolute(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	tmpWork := filepath.Join(os.TempDir(), "halley-plugins")
	cases := []struct {
		name                                         string
		env                                          map[string]string
		data, plugins, work, logs, archive, database string
	}{
		// The work dir is not in the data dir (the sandbox closes that to the plugin uids).
		{"defaults", nil, "data", "data/plugins", tmpWork, "data/plugin-logs", "data/archive", ""},
		{"relative data, plugin, work and archive dirs", map[string]string{"HALLEY_DATA_DIR": "var/../state", "HALLEY_PLUGIN_DIR": "./nas/plugins", "HALLEY_PLUGIN_WORK_DIR": "runs/",
			"HALLEY_ARCHIVE_DIR": "nas/archive/"}, "state", "nas/plugins", "runs", "state/plugin-logs", "nas/archive", ""},
		{"absolute ones stay", map[string]string{"HALLEY_DATA_DIR": "/srv/halley", "HALLEY_PLUGIN_DIR": "/mnt/nas", "HALLEY_PLUGIN_WORK_DIR": "/run/halley", "HALLEY_ARCHIVE_DIR": "/mnt/archive"},
			"/srv/halley", "/mnt/nas", "/run/halley", "/srv/halley/plugin-logs", "/mnt/archive", ""},
		{"a relative sqlite file", map[string]string{"HALLEY_DATABASE_URL": "sqlite://db/halley.db"},
			"data", "data/plugins", tmpWork, "data/plugin-logs", "data/archive", "sqlite://" + filepath.Join(wd, "db/halley.db")},
		{"an absolute sqlite file", map[string]string{"HALLEY_DATABASE_URL": "sqlite:///var/lib/h.db"},
			"data", "data/plugins", tmpWork, "data/plugin-logs", "data/archive", "sqlite:///var/lib/h.db"},
	}
	at := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(wd, p)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load("", env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			got := []string{c.DataDir, c.PluginDir, c.PluginWorkDir, c.PluginLogDir, c.ArchiveDir, c.DatabaseURL}
			want := []string{at(tc.data), at(tc.plugins), at(tc.work), at(tc.logs), at(tc.archive), tc.database}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("path %d: got %q, want %q", i, got[i], want[i])
				}
			}
			attrs := fmt.Sprint(c.PathAttrs()...)
			for _, p := range got[:5] {
				if !strings.Contains(attrs, p) {
					t.Errorf("PathAttrs %s lacks %s", attrs, p)
				}
			}
		})
	}
	// The --config file, which the sandbox closes to plugins, is a path too.
	if err := os.WriteFile("halley.yaml", []byte("log_level: warn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := config.Load("halley.yaml", env(nil)); err != nil || c.File != filepath.Join(wd, "halley.yaml") {
		t.Fatalf("config file: %v, %v", c, err)
	}
}

func TestFileAndEnvironment(t *testing.T) {
	f := filepath.Join(t.TempDir(), "halley.yaml")
	if err := os.WriteFile(f, []byte("addr: 0.0.0.0:9000\nlog_level: debug\nbody_limit: 2048\ndatabase_url: mysql://u:p@db:3306/halley\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(f, env(map[string]string{"HALLEY_LOG_LEVEL": "warn", "HALLEY_ADMIN_PASSWORD": "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != "0.0.0.0:9000" || c.LogLevel != "warn" || c.BodyLimit != 2048 || c.AdminPasswordDefaulted || c.DatabaseURL == "" {
		t.Fatalf("merged: %+v", c)
	}
}

func TestBadConfigurationNamesTheSetting(t *testing.T) {
	cases := []struct {
		env, file map[string]string
		want      string
	}{
		{env: map[string]string{"HALLEY_LOG_LEVEL": "loud"}, want: "HALLEY_LOG_LEVEL: must be one of debug, info, warn, error"},
		{env: map[string]string{"HALLEY_ADDR": "8080"}, want: "HALLEY_ADDR: must be host:port"},
		{env: map[string]string{"HALLEY_DATABASE_URL": "postgres://x/y"}, want: `HALLEY_DATABASE_URL: unsupported scheme "postgres"`},
		{env: map[string]string{"HALLEY_DATABASE_URL": "mysql://u:p@host:3306/"}, want: "HALLEY_DATABASE_URL: mysql URL needs a database name"},
		{env: map[string]string{"HALLEY_DATABASE_URL": "mysql://u:p@host:3306/db?foo=bar"}, want: `HALLEY_DATABASE_URL: unsupported parameter "foo"`},
		{env: map[string]string{"HALLEY_REDIS_URL": "http://x"}, want: `HALLEY_REDIS_URL: unknown scheme "http"`},
		{env: map[string]string{"HALLEY_REDIS_URL": "redis+cluster://h1:7000/3"}, want: "HALLEY_REDIS_URL: a Redis Cluster has only database 0"},
		{env: map[string]string{"HALLEY_TIMER_SHARDS": "0"}, want: "HALLEY_TIMER_SHARDS: must be a whole number from 1 to 1024"},
		{env: map[string]string{"HALLEY_TIMER_SHARDS": "1025"}, want: "HALLEY_TIMER_SHARDS: must be a whole number from 1 to 1024"},
		{env: map[string]string{"HALLEY_TIMER_SHARDS": "eight"}, want: "HALLEY_TIMER_SHARDS: must be a whole number from 1 to 1024"},
		{env: map[string]string{"HALLEY_SECRET": "short"}, want: "HALLEY_SECRET: must be at least 32 characters"},
		{env: map[string]string{"HALLEY_BODY_LIMIT": "lots"}, want: "HALLEY_BODY_LIMIT: must be a whole number"},
		{env: map[string]string{"HALLEY_TOKEN_TTL": "5"}, want: "HALLEY_TOKEN_TTL: must be a duration"},
		{env: map[string]string{"HALLEY_REDIS_PREFIX": "{a}:"}, want: "HALLEY_REDIS_PREFIX: must be 1 to 64 letters"},
		{env: map[string]string{"HALLEY_INSTANCE_RETENTION": "-1h"}, want: "HALLEY_INSTANCE_RETENTION: must be 0 (keep forever) or a duration"},
		{env: map[string]string{"HALLEY_INSTANCE_RETENTION_SWEEP": "10ms"}, want: "HALLEY_INSTANCE_RETENTION_SWEEP: must be a duration of at least 1s"},
		{env: map[string]string{"HALLEY_DB_WAIT": "soon"}, want: "HALLEY_DB_WAIT: must be a duration"},
		{env: map[string]string{"HALLEY_INSTANCE_RETENTION_DUTY": "0"}, want: "HALLEY_INSTANCE_RETENTION_DUTY: must be a number from 0.01 to 1"},
		{env: map[string]string{"HALLEY_INSTANCE_RETENTION_BATCH": "5000"}, want: "HALLEY_INSTANCE_RETENTION_BATCH: must be a whole number from 1 to 1000"},
		{env: map[string]string{"HALLEY_PLUGIN_PYTHON": "venv/bin/python3"}, want: "HALLEY_PLUGIN_PYTHON: must be a name looked up on the plugins' PATH or an absolute path"},
		{env: map[string]string{"HALLEY_PLUGIN_CGROUP": "halley"}, want: "HALLEY_PLUGIN_CGROUP: must be an absolute path or off"},
		{env: map[string]string{"HALLEY_PLUGIN_ALLOW_ROOT": "maybe"}, want: "HALLEY_PLUGIN_ALLOW_ROOT: must be 0 or 1"},
		{env: map[string]string{"HALLEY_OUTBOUND_ALLOW": "10.0.0.0/33"}, want: "HALLEY_OUTBOUND_ALLOW: \"10.0.0.0/33\" is not a CIDR"},
		{file: map[string]string{"colour": "blue"}, want: `unknown setting "colour"`},
		{file: map[string]string{"log_level": "loud"}, want: "log_level (in "},
	}
	for _, tc := range cases {
		path := ""
		if tc.file != nil {
			path = filepath.Join(t.TempDir(), "c.yaml")
			var b strings.Builder
			for k, v := range tc.file {
				b.WriteString(k + ": " + v + "\n")
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		_, err := config.Load(path, env(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: got %v, want %q", tc.env, tc.file, err, tc.want)
		}
	}
	// A database URL's password never appears in the error.
	_, err := config.Load("", env(map[string]string{"HALLEY_DATABASE_URL": "mysql://u:hunter2@ho st/db"}))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("password leaked or no error: %v", err)
	}
}

func TestEnsureSecretPersists(t *testing.T) {
	dir := t.TempDir()
	c := &config.Config{DataDir: dir}
	if err := c.EnsureSecret(); err != nil || len(c.Secret) < 32 || !c.SecretGenerated {
		t.Fatalf("generate: %v %+v", err, c)
	}
	st, _ := os.Stat(filepath.Join(dir, "secret"))
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("secret file mode %v", st.Mode())
	}
	c2 := &config.Config{DataDir: dir}
	if err := c2.EnsureSecret(); err != nil || c2.Secret != c.Secret || c2.SecretGenerated {
		t.Fatalf("reuse: %v", err)
	}
}

// TestDocumented keeps docs/configuration.md in step with the settings table.
func TestDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range config.Settings() {
		if !strings.Contains(string(b), s.Env) || !strings.Contains(string(b), s.Key) {
			t.Errorf("docs/configuration.md does not document %s (%s)", s.Env, s.Key)
		}
	}
}

// TestLocalURL: `halley templates load` finds the server as serve describes it: HALLEY_PUBLIC_URL, else
// http://HALLEY_ADDR with an unspecified host made the loopback.
func TestLocalURL(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{nil, "http://127.0.0.1:8080"},
		{map[string]string{"HALLEY_ADDR": "127.0.0.1:9001"}, "http://127.0.0.1:9001"},
		{map[string]string{"HALLEY_ADDR": "0.0.0.0:9002"}, "http://127.0.0.1:9002"},
		{map[string]string{"HALLEY_ADDR": "[::]:9003"}, "http://127.0.0.1:9003"},
		{map[string]string{"HALLEY_ADDR": ":9004"}, "http://127.0.0.1:9004"},
		{map[string]string{"HALLEY_ADDR": "[::1]:9005"}, "http://[::1]:9005"},
		{map[string]string{"HALLEY_ADDR": "halley.local:9006"}, "http://halley.local:9006"},
		{map[string]string{"HALLEY_ADDR": "0.0.0.0:9007", "HALLEY_PUBLIC_URL": "https://halley.example.com/"}, "https://halley.example.com"},
	}
	for _, tc := range cases {
		c, err := config.Load("", env(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.LocalURL(); got != tc.want {
			t.Errorf("%v: LocalURL() = %q, want %q", tc.env, got, tc.want)
		}
	}
}
