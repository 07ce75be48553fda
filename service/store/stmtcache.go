package store

import (
	"container/list"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Prepared step groups (MariaDB). A step group's writes go as one compound statement (sqlbatch.go) whose text,
// sent with its values spliced in, MariaDB parses anew every time: parsing was ~38 % of its CPU in a 16-client
// steps profile, most of it per quoted value (docs/benchmarks.md, "Strings as hex in a step's round trip").
// Prepared once per connection and executed with binary values, the same group statement cost MariaDB 35–43 %
// less CPU and its round trip a third less time, and preparing it anew each time cost what the text did
// (docs/benchmarks.md, "Step groups prepared"). A group's statement text depends only on how many rows of each
// table it writes, so a few hundred texts recur. MariaDB holds 0.3–0.9 MB for each prepared and run group
// statement, and a connection must keep enough of them to hold the texts that recur on it (64 kept two in three,
// 128 nine in ten): kept on every connection of a pool that would be gigabytes of the server's memory. The
// statements live on two connections of their own (preparedPool), each keeping the last Config.StmtCache texts it
// ran twice, so that the server holds at most PreparedConns × StmtCache of them for a replica. A step takes one of
// those connections when one is free, else a connection of the main pool, which sends its groups as text.

// preparedPool is the few connections that keep step groups prepared: a pool of its own, LIFO as database/sql
// pools are (the connection used last is the one most likely to keep the next group's text), taken only when one
// is free (slots), so that a step never waits for it.
type preparedPool struct {
	db    *sql.DB
	slots chan struct{}
	// resting: until when (Unix nanoseconds) no step tries them, after a connection could not be opened (the
	// server's max_connections reached, say): steps then go to the main pool without a connect attempt each.
	resting atomic.Int64
}

// preparedRest is how long the steps leave the connections alone after one could not be opened.
const preparedRest = 10 * time.Second

// PreparedConns is how many connections keep step groups prepared (MariaDB, Config.StmtCache above 0), beside the
// main pool: two took nearly every group of a 16-client steps run, and at 128 statements each nine groups in ten ran
// on a statement kept from before (docs/benchmarks.md, "Prepared groups on two connections").
const PreparedConns = 2

func newPreparedPool(dsn string, size, conns int, counts *groupCounts) (*preparedPool, error) {
	connector, err := newStmtCacheConnector(dsn, size, counts)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	// A connection idle for a minute no longer carries a busy replica's steps: its statements go with it.
	db.SetConnMaxIdleTime(time.Minute)
	db.SetConnMaxLifetime(30 * time.Minute)
	p := &preparedPool{db: db, slots: make(chan struct{}, conns)}
	for range conns {
		p.slots <- struct{}{}
	}
	return p, nil
}

// conn answers a connection of the pool and the function that gives it back, or nil at once when all of them are
// taken, or none could be opened (the error; then none is tried for preparedRest).
func (p *preparedPool) conn(ctx context.Context) (c *sql.Conn, release func(), err error) {
	if time.Now().UnixNano() < p.resting.Load() {
		return nil, nil, nil
	}
	select {
	case <-p.slots:
	default:
		return nil, nil, nil
	}
	release = func() { p.slots <- struct{}{} }
	if c, err = p.db.Conn(ctx); err != nil {
		release()
		if ctx.Err() == nil {
			p.resting.Store(time.Now().Add(preparedRest).UnixNano())
		}
		return nil, nil, err
	}
	return c, release, nil
}

// maxStmtParams is the binary protocol's bound on a prepared statement's values; a larger group goes as text.
const maxStmtParams = 65535

// GroupStatements counts step-group statements (MariaDB's compound statements with values) by how they ran: on a
// statement kept from before (Kept), prepared for the run (Prepared), or sent as text (Text: on the main pool, a
// text's first run on a connection that keeps statements, or the server's max_prepared_stmt_count reached). Zero
// when HALLEY_DB_STMT_CACHE is 0.
type GroupStatements struct {
	Kept, Prepared, Text int64
}

// groupCounts are a store's GroupStatements, shared by its connections.
type groupCounts struct {
	kept, prepared, text atomic.Int64
}

// GroupStatements reports how the store's step-group statements ran.
func (s *Store) GroupStatements() GroupStatements {
	if s.groups == nil {
		return GroupStatements{}
	}
	return GroupStatements{Kept: s.groups.kept.Load(), Prepared: s.groups.prepared.Load(), Text: s.groups.text.Load()}
}

// stmtCacheConnector opens MySQL driver connections that keep step groups' compound statements prepared (size
// above 0) or only count them (size 0, the main pool's).
type stmtCacheConnector struct {
	driver.Connector
	size   int
	counts *groupCounts
}

func (c *stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newStmtCacheConn(dc, c.size, c.counts)
}

// newStmtCacheConnector wraps the MySQL driver's connector for dsn.
func newStmtCacheConnector(dsn string, size int, counts *groupCounts) (*stmtCacheConnector, error) {
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	connector, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	return &stmtCacheConnector{Connector: connector, size: size, counts: counts}, nil
}

// stmtCacheConn is a driver connection with an LRU of prepared compound statements. database/sql uses a
// connection from one goroutine at a time, so the cache needs no lock, and an evicted statement is closed on the
// connection it belongs to. Everything but those statements goes to the driver's connection as it is.
type stmtCacheConn struct {
	driver.Conn
	beginTx   driver.ConnBeginTx
	prepare   driver.ConnPrepareContext
	execer    driver.ExecerContext
	queryer   driver.QueryerContext
	pinger    driver.Pinger
	resetter  driver.SessionResetter
	validator driver.Validator
	checker   driver.NamedValueChecker

	size  int
	full  bool       // the server refused a statement (max_prepared_stmt_count): none is prepared any more here
	order *list.List // of *cachedStmt, most recently used first
	stmts map[string]*list.Element
	// seen holds the hashes of the last texts run here that are not kept: a text is prepared the second time it
	// comes while still in seen, so that texts run once go as text — which costs the server what preparing them
	// would — and never push out the ones that recur.
	seen   *simplelru.LRU[uint64, struct{}]
	seed   maphash.Seed
	counts *groupCounts
}

type cachedStmt struct {
	query string
	stmt  interface {
		driver.Stmt
		driver.StmtExecContext
	}
}

func newStmtCacheConn(dc driver.Conn, size int, counts *groupCounts) (driver.Conn, error) {
	c := &stmtCacheConn{Conn: dc, size: size, order: list.New(), stmts: map[string]*list.Element{}, seed: maphash.MakeSeed(), counts: counts}
	if size > 0 {
		seen, err := simplelru.NewLRU[uint64, struct{}](seenPerKept*size, nil)
		if err != nil {
			_ = dc.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
		c.seen = seen
	}
	var ok [8]bool
	c.beginTx, ok[0] = dc.(driver.ConnBeginTx)
	c.prepare, ok[1] = dc.(driver.ConnPrepareContext)
	c.execer, ok[2] = dc.(driver.ExecerContext)
	c.queryer, ok[3] = dc.(driver.QueryerContext)
	c.pinger, ok[4] = dc.(driver.Pinger)
	c.resetter, ok[5] = dc.(driver.SessionResetter)
	c.validator, ok[6] = dc.(driver.Validator)
	c.checker, ok[7] = dc.(driver.NamedValueChecker)
	for _, o := range ok {
		if !o {
			_ = dc.Close()
			return nil, fmt.Errorf("store: the MySQL driver's connection %T lacks an interface the statement cache forwards", dc)
		}
	}
	return c, nil
}

func (c *stmtCacheConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.beginTx.BeginTx(ctx, opts)
}

func (c *stmtCacheConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.prepare.PrepareContext(ctx, query)
}

func (c *stmtCacheConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.queryer.QueryContext(ctx, query, args)
}

func (c *stmtCacheConn) Ping(ctx context.Context) error { return c.pinger.Ping(ctx) }

func (c *stmtCacheConn) ResetSession(ctx context.Context) error { return c.resetter.ResetSession(ctx) }

func (c *stmtCacheConn) IsValid() bool { return c.validator.IsValid() }

func (c *stmtCacheConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.checker.CheckNamedValue(nv)
}

// Close closes the connection; its statements go with it on the server.
func (c *stmtCacheConn) Close() error {
	c.order.Init()
	clear(c.stmts)
	return c.Conn.Close()
}

// ExecContext runs a compound statement with values on a statement prepared for it, everything else as the driver
// does (its values interpolated into the text).
func (c *stmtCacheConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 || !strings.HasPrefix(query, blockBegin) {
		return c.execer.ExecContext(ctx, query, args)
	}
	if c.size <= 0 || len(args) > maxStmtParams {
		return c.text(ctx, query, args)
	}
	e, kept := c.stmts[query]
	if !kept && (c.full || !c.again(query)) {
		return c.text(ctx, query, args)
	}
	var cs *cachedStmt
	if kept {
		c.order.MoveToFront(e)
		cs = e.Value.(*cachedStmt)
	} else {
		var err error
		if cs, err = c.add(ctx, query); err != nil {
			if isServerError(err, 1461) { // max_prepared_stmt_count: the server's limit, shared by all its clients
				c.full = true
				return c.text(ctx, query, args)
			}
			return nil, err
		}
	}
	res, err := cs.stmt.ExecContext(ctx, args)
	if isServerError(err, 1243) { // unknown statement handler: the session lost its statements (a reset)
		c.drop()
		return c.text(ctx, query, args)
	}
	if kept {
		c.counts.kept.Add(1)
	} else {
		c.counts.prepared.Add(1)
	}
	return res, err
}

// text sends a group statement as text, its values interpolated by the driver.
func (c *stmtCacheConn) text(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.counts.text.Add(1)
	return c.execer.ExecContext(ctx, query, args)
}

// seenPerKept is how many texts not kept a connection remembers having run, per statement it keeps.
const seenPerKept = 4

// again reports whether query ran here lately (and forgets it then: it is about to be kept); else it remembers it.
func (c *stmtCacheConn) again(query string) bool {
	h := maphash.String(c.seed, query)
	if c.seen.Remove(h) {
		return true
	}
	c.seen.Add(h, struct{}{})
	return false
}

// add prepares query and keeps it, closing the least recently used statement beyond the size.
func (c *stmtCacheConn) add(ctx context.Context, query string) (*cachedStmt, error) {
	st, err := c.prepare.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	se, ok := st.(interface {
		driver.Stmt
		driver.StmtExecContext
	})
	if !ok {
		_ = st.Close()
		return nil, fmt.Errorf("store: the MySQL driver's statement %T has no ExecContext", st)
	}
	cs := &cachedStmt{query: query, stmt: se}
	c.stmts[query] = c.order.PushFront(cs)
	for c.order.Len() > c.size {
		old := c.order.Remove(c.order.Back()).(*cachedStmt)
		delete(c.stmts, old.query)
		_ = old.stmt.Close() // COM_STMT_CLOSE has no answer; an error here is the connection's, seen by its next use
	}
	return cs, nil
}

// drop forgets every kept statement (the server no longer has them).
func (c *stmtCacheConn) drop() {
	c.order.Init()
	clear(c.stmts)
}

func isServerError(err error, number uint16) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == number
}
