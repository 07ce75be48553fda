package store

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
)

// Prepared step groups (MariaDB). A step group's writes go as one compound statement (sqlbatch.go) whose text,
// sent with its values spliced in, MariaDB parses anew every time: parsing was ~38 % of its CPU in a 16-client
// steps profile, most of it per quoted value (docs/benchmarks.md, "Strings as hex in a step's round trip").
// Prepared once per connection and executed with binary values, the same group statement cost MariaDB 35–43 %
// less CPU and its round trip a third less time, and preparing it anew each time cost what the text did
// (docs/benchmarks.md, "Step groups prepared"). A group's statement text depends only on how many rows of each
// table it writes, so a few hundred texts recur: each pooled connection keeps the last Config.StmtCache of them
// prepared, closing the least recently used. Off by default: MariaDB holds 0.3-0.9 MB for each prepared and run
// group statement, and the texts of a steps run at 16 clients recurred only two times in three at 64 a connection.

// maxStmtParams is the binary protocol's bound on a prepared statement's values; a larger group goes as text.
const maxStmtParams = 65535

// stmtCacheConnector opens MySQL driver connections that keep step groups' compound statements prepared.
type stmtCacheConnector struct {
	driver.Connector
	size int
}

func (c *stmtCacheConnector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newStmtCacheConn(dc, c.size)
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
}

type cachedStmt struct {
	query string
	stmt  interface {
		driver.Stmt
		driver.StmtExecContext
	}
}

func newStmtCacheConn(dc driver.Conn, size int) (driver.Conn, error) {
	c := &stmtCacheConn{Conn: dc, size: size, order: list.New(), stmts: map[string]*list.Element{}}
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
	if c.size <= 0 || len(args) == 0 || len(args) > maxStmtParams || !strings.HasPrefix(query, blockBegin) {
		return c.execer.ExecContext(ctx, query, args)
	}
	e, kept := c.stmts[query]
	if !kept && c.full {
		return c.execer.ExecContext(ctx, query, args)
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
				return c.execer.ExecContext(ctx, query, args)
			}
			return nil, err
		}
	}
	res, err := cs.stmt.ExecContext(ctx, args)
	if isServerError(err, 1243) { // unknown statement handler: the session lost its statements (a reset)
		c.drop()
		return c.execer.ExecContext(ctx, query, args)
	}
	return res, err
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
