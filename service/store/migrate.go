package store

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	halleysql "github.com/halley-bpm/halley/sql"
)

// Migration is one numbered file of sql/.
type Migration struct {
	Version    int
	Name       string
	Statements []string // MySQL statements, in order
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// LoadMigrations reads and orders the migrations of fsys (sql.Migrations in production).
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("store: unable to list migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: unable to read migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: m[2], Statements: splitStatements(string(b))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("store: migrations must be numbered 1, 2, 3... without gaps; found %04d at position %d", m.Version, i+1)
		}
	}
	return out, nil
}

// splitStatements cuts a migration at `;` that end a line, dropping `--` comment lines.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

var (
	tableOptions = regexp.MustCompile(`(?s)\)\s*ENGINE=[^;]*$`)
	autoIncPK    = regexp.MustCompile(`(?i)BIGINT\s+NOT\s+NULL\s+AUTO_INCREMENT\s+PRIMARY\s+KEY`)
	datetime6    = regexp.MustCompile(`(?i)\bDATETIME\(\d\)`)
	dropIndexOn  = regexp.MustCompile(`(?is)^(\s*DROP\s+INDEX\s+\w+)\s+ON\s+\w+\s*$`)
)

// ToSQLite derives the SQLite form of a MySQL migration statement: table options go, AUTO_INCREMENT keys become
// SQLite's rowid alias, DATETIME(6) becomes DATETIME (the driver parses times by that exact declared type), and
// "DROP INDEX name ON table" loses its table (SQLite's index names are per database). The migrations are written in
// the subset where these are the only differences, and TestSchemasMatch proves both databases end up with the same
// tables, columns and indexes.
func ToSQLite(stmt string) string {
	stmt = tableOptions.ReplaceAllString(stmt, ")")
	stmt = autoIncPK.ReplaceAllString(stmt, "INTEGER PRIMARY KEY AUTOINCREMENT")
	stmt = datetime6.ReplaceAllString(stmt, "DATETIME")
	stmt = dropIndexOn.ReplaceAllString(stmt, "$1")
	return stmt
}

// SchemaVersion returns the highest applied migration, 0 for an empty database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	if !s.db.Migrator().HasTable("schema_migrations") {
		return 0, nil
	}
	var v *int
	if err := s.db.WithContext(ctx).Raw("SELECT MAX(version) FROM schema_migrations").Scan(&v).Error; err != nil {
		return 0, fmt.Errorf("store: unable to read the schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// Migrate applies the embedded migrations that the database has not seen yet, recording each in
// schema_migrations. Re-running is a no-op. A database whose schema is newer than this binary knows is refused:
// an old binary must not write into a schema it does not understand. On MySQL a named lock keeps replicas that
// start together from applying the same migration twice.
func (s *Store) Migrate(ctx context.Context) (applied int, err error) {
	migs, err := LoadMigrations(halleysql.Migrations)
	if err != nil {
		return 0, err
	}
	applied, err = s.MigrateWith(ctx, migs)
	if err != nil {
		return applied, err
	}
	// Users who share a username key with an older user (migration account_ids): reported at every start
	// until an admin deletes one of the two; never renamed.
	conflicts, err := s.UsernameConflicts(ctx)
	if err != nil {
		return applied, err
	}
	for _, c := range conflicts {
		s.log.Warn("store: two users have names that differ only in letter case or Unicode form; both keep working, "+
			"new look-alikes are refused; delete one of them (DELETE /api/v1/users/{username}) to end this warning",
			"tenant", c.TenantID, "username", c.Username, "same_as", c.Holder)
	}
	return applied, nil
}

// MigrateWith applies the given migrations (tests pass their own).
func (s *Store) MigrateWith(ctx context.Context, migs []Migration) (applied int, err error) {
	conn := s.db.WithContext(ctx)
	if s.dialect == MySQL {
		// A named lock is held by the connection: pin one connection for the whole run.
		var c *gorm.DB
		sqlConn, err := s.sqlDB.Conn(ctx)
		if err != nil {
			return 0, fmt.Errorf("store: %w", err)
		}
		defer sqlConn.Close() //nolint:errcheck // returns the connection to the pool; it fails only on one already closed
		c = conn.Session(&gorm.Session{NewDB: true})
		c.Statement.ConnPool = sqlConn
		// Named locks are server-wide: the name carries the database's so that deployments (or test
		// databases) sharing one MariaDB server do not wait on each other's migrations.
		const lock = "CONCAT('halley_migrate:', SHA1(DATABASE()))"
		var got int
		if err := c.Raw("SELECT GET_LOCK(" + lock + ", 60)").Scan(&got).Error; err != nil || got != 1 {
			return 0, fmt.Errorf("store: unable to take the migration lock (another replica migrating?): %v", err)
		}
		defer c.Exec("SELECT RELEASE_LOCK(" + lock + ")")
		conn = c
	}
	create := "CREATE TABLE IF NOT EXISTS schema_migrations (version INT NOT NULL PRIMARY KEY, name VARCHAR(255) NOT NULL, applied_at DATETIME(6) NOT NULL) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
	if s.dialect == SQLite {
		create = ToSQLite(create)
	}
	if err := conn.Exec(create).Error; err != nil {
		return 0, fmt.Errorf("store: unable to create schema_migrations: %w", err)
	}
	var have []int
	if err := conn.Raw("SELECT version FROM schema_migrations ORDER BY version").Scan(&have).Error; err != nil {
		return 0, fmt.Errorf("store: unable to read schema_migrations: %w", err)
	}
	known := 0
	if len(migs) > 0 {
		known = migs[len(migs)-1].Version
	}
	current := 0
	if len(have) > 0 {
		current = have[len(have)-1]
	}
	if current > known {
		return 0, fmt.Errorf("store: the database schema is at version %d but this binary only knows up to %d: upgrade Halley before starting it on this database", current, known)
	}
	done := map[int]bool{}
	for _, v := range have {
		done[v] = true
	}
	for _, m := range migs {
		if done[m.Version] {
			continue
		}
		for i, stmt := range m.Statements {
			if s.dialect == SQLite {
				stmt = ToSQLite(stmt)
			}
			if err := conn.Exec(stmt).Error; err != nil {
				return applied, fmt.Errorf("store: migration %04d_%s statement %d failed: %w", m.Version, m.Name, i+1, err)
			}
		}
		if step := migrationSteps[m.Name]; step != nil {
			if err := step(ctx, s, conn); err != nil {
				return applied, fmt.Errorf("store: migration %04d_%s: %w", m.Version, m.Name, err)
			}
		}
		if err := conn.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", m.Version, m.Name, time.Now().UTC()).Error; err != nil {
			return applied, fmt.Errorf("store: unable to record migration %04d: %w", m.Version, err)
		}
		s.log.Info("store: applied migration", "version", m.Version, "name", m.Name, "dialect", s.dialect)
		applied++
	}
	return applied, nil
}
