// Package store is the only package that talks to the database: gorm over MySQL/MariaDB in production and a
// pure-Go SQLite file for the embedded default. It applies the migrations of sql/ at start and implements the
// store interfaces declared in model.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/glebarez/sqlite"
	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// Dialects.
const (
	MySQL  = "mysql"
	SQLite = "sqlite"
)

// Config says where the database is and how to pool connections.
type Config struct {
	// URL is mysql://user:pass@host:3306/db?param=value, sqlite:///abs/path.db, sqlite://rel/path.db,
	// or empty for <DataDir>/halley.db.
	URL     string
	DataDir string
	// Pool settings; zero values take the defaults of the dialect.
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	// TimerConns is the slice of the MySQL pool kept for firing timers (model.ForTimerFiring): step
	// transactions hold at most MaxOpenConns - TimerConns connections at once, so fires never wait behind them
	// for one. At most half the pool; 0 keeps none apart.
	TimerConns int
	// StepCache is how many instances' rows (MySQL) are kept from the step that wrote them, so that their next
	// step skips its lock read (stepcache.go); 0 means DefaultStepCache, a negative number none.
	StepCache int
	// StmtCache is how many step-group statements (MariaDB) each of two connections beside the pool keeps
	// prepared (stmtcache.go); 0 or less: none, and no such connections.
	StmtCache int
	Logger    *slog.Logger
	// Wait is how long Open keeps trying while the database does not accept connections yet (a replica started
	// with, or before, its database): attempts back off from 250 ms to 5 s and each failure is logged. 0 tries once.
	Wait time.Duration
	// MustExist opens an embedded SQLite database only if its file is already there, for commands that read
	// (halley archive show): they must not leave an empty halley.db behind in whatever directory they ran in.
	MustExist bool
}

// DefaultStepCache is Config.StepCache's default.
const DefaultStepCache = 4096

// Store implements the model's store interfaces on one gorm connection pool.
type Store struct {
	db      *gorm.DB
	sqlDB   *sql.DB
	dialect string
	// stepSlots bounds the step transactions holding a connection at once (the pool less its timer slice); nil
	// when no slice is kept.
	stepSlots chan struct{}
	cache     *stepCache // nil: off (SQLite, or Config.StepCache 0)
	// blocks: the server is MariaDB (not in Oracle mode), and a batch's round trip goes as one compound statement
	// (sqlbatch.go, blockBegin).
	blocks bool
	// prepared: the connections that keep step groups prepared (stmtcache.go); nil when off.
	prepared *preparedPool
	groups   *groupCounts // how the step groups ran (GroupStatements); nil when off
	log      *slog.Logger
	now      func() time.Time
	userHook atomic.Pointer[func(tenant, username string)] // OnUserChange
}

// Open connects (creating the SQLite file and its folder when needed), tunes the pool and pings. While the
// database cannot be reached it retries for up to cfg.Wait, logging each attempt; a configuration error (a bad
// URL, wrong credentials, an unknown database) fails at once. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	dialect, dsn, err := ParseURL(cfg.URL, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cfg.Wait)
	backoff := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		s, err := open(ctx, cfg, lg, dialect, dsn)
		if err == nil {
			if attempt > 1 {
				lg.Info("store: the database answers", "dialect", dialect, "attempt", attempt)
			}
			return s, nil
		}
		wait := min(backoff, time.Until(deadline))
		// A local SQLite file that cannot be opened now will not open later either.
		if dialect == SQLite || !transient(err) || wait <= 0 || ctx.Err() != nil {
			if attempt > 1 {
				return nil, fmt.Errorf("%w (gave up after %d attempts in %s; HALLEY_DB_WAIT)", err, attempt, cfg.Wait)
			}
			return nil, err
		}
		lg.Warn("store: the database is not reachable yet; retrying", "dialect", dialect, "attempt", attempt,
			"retry_in", wait.Round(time.Millisecond), "gives_up_in", time.Until(deadline).Round(time.Second), "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (stopped while waiting for the database)", err)
		case <-time.After(wait):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// transient reports whether an error opening the database may go away by itself (the server is starting, the
// network or DNS is not up yet), as opposed to a configuration error that retrying cannot fix.
func transient(err error) bool {
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, 1045, 1049, 1698: // access denied (to the database), unknown database, no password login
			return false
		}
		return true
	}
	return true
}

func open(ctx context.Context, cfg Config, lg *slog.Logger, dialect, dsn string) (*Store, error) {
	gcfg := &gorm.Config{
		SkipDefaultTransaction: true,
		PrepareStmt:            false,
		Logger:                 newGormLogger(lg),
		NowFunc:                func() time.Time { return time.Now().UTC() },
	}
	var dialector gorm.Dialector
	var groups *groupCounts
	switch dialect {
	case MySQL:
		mcfg := mysql.Config{DSN: dsn, DefaultStringSize: 255}
		if cfg.StmtCache > 0 {
			// The pool's connections only count the step groups they send as text (stmtcache.go).
			groups = &groupCounts{}
			connector, err := newStmtCacheConnector(dsn, 0, groups)
			if err != nil {
				return nil, err
			}
			mcfg.Conn = sql.OpenDB(connector)
		}
		dialector = mysql.New(mcfg)
	case SQLite:
		if cfg.MustExist {
			if _, err := os.Stat(dsnPath(dsn)); err != nil {
				return nil, fmt.Errorf("store: no SQLite database at %s (check HALLEY_DATA_DIR or HALLEY_DATABASE_URL): %w", dsnPath(dsn), err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(dsnPath(dsn)), 0o750); err != nil {
			return nil, fmt.Errorf("store: unable to create the folder of the SQLite file: %w", err)
		}
		dialector = sqlite.Open(dsn)
	}
	db, err := gorm.Open(dialector, gcfg)
	if err != nil {
		return nil, fmt.Errorf("store: unable to open %s database: %w", dialect, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	open, idle, life := cfg.MaxOpenConns, cfg.MaxIdleConns, cfg.ConnMaxLifetime
	if open == 0 {
		open = map[string]int{MySQL: 64, SQLite: 8}[dialect]
	}
	if idle == 0 {
		idle = open
	}
	if life == 0 {
		life = 30 * time.Minute
	}
	sqlDB.SetMaxOpenConns(open)
	sqlDB.SetMaxIdleConns(idle)
	sqlDB.SetConnMaxLifetime(life)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	s := &Store{db: db, sqlDB: sqlDB, dialect: dialect, groups: groups, log: lg, now: func() time.Time { return time.Now().UTC() }}
	if n := min(cfg.TimerConns, open/2); dialect == MySQL && n > 0 {
		s.stepSlots = make(chan struct{}, open-n)
	}
	if n := cfg.StepCache; dialect == MySQL && n >= 0 {
		if n == 0 {
			n = DefaultStepCache
		}
		s.cache = newStepCache(n)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Ping(pctx); err != nil {
		_ = sqlDB.Close() // the ping's error is the one to report
		return nil, fmt.Errorf("store: unable to reach the %s database: %w", dialect, err)
	}
	if dialect == MySQL {
		var version, mode string
		if err := sqlDB.QueryRowContext(pctx, "SELECT VERSION(), @@SESSION.sql_mode").Scan(&version, &mode); err != nil {
			_ = sqlDB.Close()
			return nil, fmt.Errorf("store: unable to read the server's version: %w", err)
		}
		s.blocks = strings.Contains(version, "MariaDB") && !strings.Contains(mode, "ORACLE")
		if n := cfg.StmtCache; s.blocks && n > 0 {
			if s.prepared, err = newPreparedPool(dsn, n, PreparedConns, groups); err != nil {
				_ = sqlDB.Close()
				return nil, err
			}
		}
	}
	return s, nil
}

// ParseURL turns Halley's database URL into a dialect and a driver DSN.
func ParseURL(raw, dataDir string) (dialect, dsn string, err error) {
	const sqliteParams = "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	if raw == "" {
		if dataDir == "" {
			dataDir = "data"
		}
		return SQLite, filepath.Join(dataDir, "halley.db") + sqliteParams, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("database URL: %v", redactURLError(err))
	}
	switch u.Scheme {
	case "sqlite":
		p := u.Host + u.Path
		if p == "" {
			return "", "", errors.New("database URL: sqlite URL needs a file path, e.g. sqlite:///var/lib/halley/halley.db")
		}
		return SQLite, p + sqliteParams, nil
	case "mysql":
		if u.Host == "" {
			return "", "", errors.New("database URL: mysql URL needs a host, e.g. mysql://user:pass@127.0.0.1:3306/halley")
		}
		db := strings.TrimPrefix(u.Path, "/")
		if db == "" || strings.Contains(db, "/") {
			return "", "", errors.New("database URL: mysql URL needs a database name, e.g. mysql://user:pass@127.0.0.1:3306/halley")
		}
		c := mysqldriver.NewConfig()
		c.Net = "tcp"
		c.Addr = u.Host
		if u.Port() == "" {
			c.Addr = u.Host + ":3306"
		}
		c.DBName = db
		if u.User != nil {
			c.User = u.User.Username()
			c.Passwd, _ = u.User.Password()
		}
		c.ParseTime = true
		c.Loc = time.UTC
		// Times go to the server as text; Go's carry nanoseconds, and a DATETIME(6) compared with a literal of more
		// than six fractional digits is not read as a range: MariaDB scanned the whole index instead (the re-arm's
		// "timers armed in the last minutes", a few rows, read ~1M index entries at a million timers:
		// docs/benchmarks.md "Nanoseconds, and the instance gauge"). The server keeps microseconds, so nothing is lost.
		if err := c.Apply(mysqldriver.TimeTruncate(time.Microsecond)); err != nil {
			return "", "", fmt.Errorf("database URL: %w", err)
		}
		c.Collation = "utf8mb4_bin"
		c.InterpolateParams = true // one round trip per statement instead of prepare+execute+close
		// A step's writes go as one multi-statement round trip (sqlbatch.go); every value in them is escaped by
		// the driver's interpolation, never spliced into the SQL text.
		c.MultiStatements = true
		c.Timeout = 10 * time.Second
		q := u.Query()
		for k, vs := range q {
			switch k {
			case "tls", "timeout", "readTimeout", "writeTimeout", "maxAllowedPacket":
				// parsed below through the driver's own DSN parser
			default:
				return "", "", fmt.Errorf("database URL: unsupported parameter %q (supported: tls, timeout, readTimeout, writeTimeout, maxAllowedPacket)", k)
			}
			_ = vs
		}
		dsn = c.FormatDSN()
		if len(q) > 0 {
			dsn += "&" + q.Encode()
		}
		if _, err := mysqldriver.ParseDSN(dsn); err != nil {
			return "", "", fmt.Errorf("database URL: %v", err)
		}
		return MySQL, dsn, nil
	default:
		return "", "", fmt.Errorf("database URL: unsupported scheme %q (use mysql:// or sqlite://)", u.Scheme)
	}
}

// redactURLError keeps a password in a malformed URL out of error messages.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func dsnPath(dsn string) string {
	if i := strings.IndexByte(dsn, '?'); i >= 0 {
		return dsn[:i]
	}
	return dsn
}

// Dialect returns MySQL or SQLite.
func (s *Store) Dialect() string { return s.dialect }

// DB exposes the gorm handle to the other files of this package and to tests of the store.
func (s *Store) DB() *gorm.DB { return s.db }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.sqlDB.PingContext(ctx) }

// Stats returns the pool statistics (exported as metrics), the connections that keep step groups prepared
// included.
func (s *Store) Stats() sql.DBStats {
	st := s.sqlDB.Stats()
	if s.prepared == nil {
		return st
	}
	p := s.prepared.db.Stats()
	st.MaxOpenConnections += p.MaxOpenConnections
	st.OpenConnections += p.OpenConnections
	st.InUse += p.InUse
	st.Idle += p.Idle
	st.WaitCount += p.WaitCount
	st.WaitDuration += p.WaitDuration
	st.MaxIdleClosed += p.MaxIdleClosed
	st.MaxIdleTimeClosed += p.MaxIdleTimeClosed
	st.MaxLifetimeClosed += p.MaxLifetimeClosed
	return st
}

// Close closes the pools.
func (s *Store) Close() error {
	if s.prepared != nil {
		_ = s.prepared.db.Close() // the main pool's error is the one to report
	}
	return s.sqlDB.Close()
}

// SetNow replaces the store's clock (tests).
func (s *Store) SetNow(now func() time.Time) { s.now = func() time.Time { return now().UTC() } }

// isDuplicate reports a unique-key violation on either dialect.
func isDuplicate(err error) bool {
	if err == nil {
		return false
	}
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "PRIMARY KEY constraint failed")
}

// isRetryable reports a deadlock or lock wait timeout (MySQL) or a busy database (SQLite): the whole
// transaction can be run again.
func isRetryable(err error) bool {
	if err == nil {
		return false
	}
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	msg := err.Error()
	return strings.Contains(msg, "database is locked") || strings.Contains(msg, "SQLITE_BUSY")
}

// inTx runs fn in a transaction, retrying it a bounded number of times on deadlocks and lock timeouts.
func (s *Store) inTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return s.inTxOpts(ctx, nil, fn)
}

// readCommitted is for queue-like transactions (outbox dispatch, run claims) that lock rows with SKIP LOCKED and
// delete or update them by primary key: without gap locks, dispatchers on different rows never deadlock.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

func (s *Store) inTxOpts(ctx context.Context, opts *sql.TxOptions, fn func(tx *gorm.DB) error) error {
	if s.dialect == SQLite {
		opts = nil // SQLite transactions are serialisable; it refuses other levels
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if opts != nil {
			err = s.db.WithContext(ctx).Transaction(fn, opts)
		} else {
			err = s.db.WithContext(ctx).Transaction(fn)
		}
		if a := model.AuditFrom(ctx); a != nil && a.Staged() {
			// The audit entry written in fn commits or rolls back with it.
			if err == nil {
				a.Committed()
			} else {
				a.Unstage()
			}
		}
		if !isRetryable(err) {
			return err
		}
		s.log.Warn("store: retrying transaction", "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	return err
}

// notFound maps gorm's not-found to a domain error.
func notFound(err error, format string, args ...any) error {
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return model.Errorf(model.ENOTFOUND, format, args...)
	}
	return err
}
