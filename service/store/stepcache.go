package store

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/halley-bpm/halley/model"
)

// The step cache (MySQL): what a step's lock read would return — the instance row and its open task rows — kept
// from the step that wrote them, so that the instance's next step in this process skips that read. The read is
// two statements of the step's eight or so, and MariaDB spends about as much on each statement as on a one-row
// commit (docs/benchmarks.md, "A step without its lock read").
//
// A cached row is checked, not trusted: the step's first write is
//
//	INSERT INTO instances (...) VALUES (...), ... ON DUPLICATE KEY UPDATE
//	    state = IF(rev = VALUES(rev) - 1 AND tenant_id = VALUES(tenant_id), VALUES(state), state), ..., rev = IF(...)
//
// which changes a row only when its rev is the cached one (a step raises it by one; see checkedUpsert). Every committed change to an instance row raises its rev (a step: newStep's
// Rev++; SwapContext), and its open tasks are written only by steps of the instance, so a row whose rev is the
// cached one is the row, and its open tasks are the cached ones. When the update finds fewer rows than the step
// has (another process's step, an archived instance), the transaction is rolled back, the entries dropped, and the
// step runs again on a locked read. A step that fails on cached rows runs again the same way: its error is decided
// on the rows under the lock. The update locks the rows in id order, like the lock read.

// errStaleCache sends a transaction that ran on cached rows back to run on a locked read.
var errStaleCache = errors.New("store: cached instance rows are stale")

// cachedWork is one instance's lock read as a step wrote it.
type cachedWork struct {
	inst  instanceRow
	tasks []taskRow
}

type stepCache struct {
	lru   *lru.Cache[string, *cachedWork]
	hits  atomic.Int64 // transactions run on cached rows
	stale atomic.Int64 // of those, run again on a locked read
}

// StepCacheStats counts the step cache's transactions: run on cached rows, and of those run again on a locked
// read (stale rows, or a step that failed on them). Zero when the cache is off.
type StepCacheStats struct {
	Hits, Stale int64
}

// StepCacheStats reports the step cache's counts.
func (s *Store) StepCacheStats() StepCacheStats {
	if s.cache == nil {
		return StepCacheStats{}
	}
	return StepCacheStats{Hits: s.cache.hits.Load(), Stale: s.cache.stale.Load()}
}

func newStepCache(size int) *stepCache {
	if size <= 0 {
		return nil
	}
	c, err := lru.New[string, *cachedWork](size)
	if err != nil {
		return nil // only for a size <= 0
	}
	return &stepCache{lru: c}
}

func cacheKey(tenant, id string) string { return tenant + "\x00" + id }

// all returns the cached works of every id, or nil when one is missing (a transaction runs on cached rows for all
// its instances or for none).
func (c *stepCache) all(tenant string, ids []string) []*cachedWork {
	if c == nil || len(ids) == 0 {
		return nil
	}
	out := make([]*cachedWork, 0, len(ids))
	for _, id := range ids {
		cw, ok := c.lru.Get(cacheKey(tenant, id))
		if !ok {
			return nil
		}
		out = append(out, cw)
	}
	c.hits.Add(1)
	return out
}

func (c *stepCache) evict(tenant string, ids []string) {
	if c == nil {
		return
	}
	for _, id := range ids {
		c.lru.Remove(cacheKey(tenant, id))
	}
}

// keep caches what the committed works left: each instance row as written and its tasks still open. An instance
// that ended is dropped instead: it takes no more steps worth a cache entry.
func (c *stepCache) keep(written map[string]instanceRow, ws []*model.Work) {
	if c == nil {
		return
	}
	for _, w := range ws {
		r, ok := written[w.Instance.ID]
		key := cacheKey(w.Instance.TenantID, w.Instance.ID)
		if !ok || w.Instance.Ended() {
			c.lru.Remove(key)
			continue
		}
		cw := &cachedWork{inst: asStored(r), tasks: openTaskRows(w)}
		if cw.size() > maxCachedWork {
			c.lru.Remove(key) // a huge instance (thousands of open tasks) is read under the lock each time
			continue
		}
		c.lru.Add(key, cw)
	}
}

// maxCachedWork bounds one entry's size, so that the cache's memory is about its entries times a few KB.
const maxCachedWork = 64 << 10

// size is about the bytes the entry holds.
func (cw *cachedWork) size() int {
	n := 256 + len(cw.inst.State) + len(cw.inst.Context) + len(cw.inst.Title) + len(cw.inst.TitleI18n.String)
	for i := range cw.tasks {
		t := &cw.tasks[i]
		n += 320 + len(t.Data) + len(t.Comment) + len(t.AfterSigners) + len(t.Title) + len(t.NodeName)
	}
	return n
}

// openTaskRows are the work's open tasks after its step, as the lock read would return them (ORDER BY id).
func openTaskRows(w *model.Work) []taskRow {
	byID := make(map[string]*model.Task, len(w.Tasks)+len(w.NewTasks))
	for _, t := range w.Tasks {
		byID[t.ID] = t
	}
	for _, t := range w.NewTasks {
		byID[t.ID] = t
	}
	for id, t := range w.ChangedTasks {
		byID[id] = t
	}
	rows := make([]taskRow, 0, len(byID))
	for _, t := range byID {
		if t.Status == model.TaskPending || t.Status == model.TaskWaiting {
			r := toTaskRow(t)
			r.CreatedAt = r.CreatedAt.Truncate(time.Microsecond)
			r.DecidedAt = truncPtr(r.DecidedAt)
			r.UrgedAt = truncPtr(r.UrgedAt)
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b taskRow) int { return strings.Compare(a.ID, b.ID) })
	return rows
}

// asStored is r as a read returns it: DATETIME(6) keeps microseconds.
func asStored(r instanceRow) instanceRow {
	r.CreatedAt = r.CreatedAt.Truncate(time.Microsecond)
	r.UpdatedAt = r.UpdatedAt.Truncate(time.Microsecond)
	r.EndedAt = truncPtr(r.EndedAt)
	return r
}

func truncPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.Truncate(time.Microsecond)
	return &u
}

// cachedWorks turns cached works into the works a lock read would have given, each with rows of its own.
func cachedWorks(cws []*cachedWork) ([]*model.Work, error) {
	ws := make([]*model.Work, 0, len(cws))
	for _, cw := range cws {
		r := cw.inst
		inst, err := r.toModel(true)
		if err != nil {
			return nil, err
		}
		w := &model.Work{Instance: inst, Tasks: make([]*model.Task, 0, len(cw.tasks)), ChangedTasks: map[string]*model.Task{}}
		for i := range cw.tasks {
			t := cw.tasks[i]
			w.Tasks = append(w.Tasks, t.toModel())
		}
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b *model.Work) int { return strings.Compare(a.Instance.ID, b.Instance.ID) })
	return ws, nil
}

// checkedRows is the most rows one checked update writes: at 256 rows MariaDB spent 84-88 us of CPU a row on the
// statement, at 32 rows 46-54 (docs/benchmarks.md, "The checked write without CASE").
const checkedRows = 32

// checkedUpsert is the statement that writes the instance rows of works that ran on cached rows, each only if its
// rev is still the cached one, and its arguments; ok is false unless every row's rev is its cached rev plus one
// (revs: instance id → cached rev), the case checkedUpdate serves. One statement for all of them: rows affected is
// 2 for each row changed, 0 for a row left as it was (its rev is not the cached one) and 1 for a row inserted (it
// was deleted: archived meanwhile); so every row was as cached exactly when it is twice the rows. The insert of
// a deleted row is rolled back with the transaction. Rows are written in id order, as the lock read locks them.
//
// It does what checkedUpdate does for less: MariaDB spent 16-30 us of CPU a row on it alone against 38-56 for the
// CASE update, whose CASE per column walks its WHEN list for every row, and Halley sends 15 arguments a row, not
// 20 (docs/benchmarks.md, "The checked write without CASE").
func checkedUpsert(rows []instanceRow, revs map[string]int64) (q string, args []any, ok bool) {
	for i := range rows {
		if rows[i].Rev != revs[rows[i].ID]+1 {
			return "", nil, false
		}
	}
	args = make([]any, 0, len(rows)*instanceColsN)
	for i := range rows {
		args = append(args, instanceArgs(&rows[i])...)
	}
	return checkedUpsertSQL(len(rows)), args, true
}

// checkedGuardSQL follows checkedUpsert's statement in the batch that carries the rest of the step's writes and
// its COMMIT, its argument twice the rows written: it fails with "subquery returns more than 1 row" unless the
// upsert affected that many rows (ROW_COUNT(), the session's count for its previous statement), and MySQL stops a
// multi-statement round trip at its first failing statement, so the commit does not run and the transaction is
// rolled back (isGuardFailed: errStaleCache). The upsert's rows affected read by the driver cost a round trip of
// its own; this costs none. SET, not DO: MariaDB's DO does not report the subquery's error.
const checkedGuardSQL = "SET @halley_checked = (SELECT 1 UNION ALL SELECT 1 FROM DUAL WHERE ROW_COUNT() <> ?)"

// isGuardFailed reports the error of checkedGuardSQL: MySQL's ER_SUBQUERY_NO_1_ROW, which no other statement of a
// step's batch can raise (none has a scalar subquery).
func isGuardFailed(err error) bool {
	var me *mysqldriver.MySQLError
	return errors.As(err, &me) && me.Number == 1242
}

// checksRuns reports whether a work's writes check plugin runs (RunUpdates that must find their run still
// running): those run before the batch, so the instance rows are written — and locked — on their own first, to
// keep the lock order of instance, then run.
func checksRuns(ws []*model.Work) bool {
	for _, w := range ws {
		for _, u := range w.RunUpdates {
			if !u.Close {
				return true
			}
		}
	}
	return false
}

// checkedUpsertSQL is checkedUpsert's statement for n rows.
func checkedUpsertSQL(n int) string {
	const cond = "rev = VALUES(rev) - 1 AND tenant_id = VALUES(tenant_id)"
	var b strings.Builder
	b.WriteString("INSERT INTO instances (" + instanceCols + ") VALUES " + rowsOf(n, instanceColsN) + " ON DUPLICATE KEY UPDATE ")
	// rev last: each assignment sees the ones before it, and every other one asks for the stored rev.
	for _, col := range []string{"title", "title_i18n", "status", "context", "state", "updated_at", "ended_at", "correlation_id", "rev"} {
		if col != "title" {
			b.WriteString(", ")
		}
		b.WriteString(col + " = IF(" + cond + ", VALUES(" + col + "), " + col + ")")
	}
	return b.String()
}

// checkedUpdate is the statement that writes the instance rows of works that ran on cached rows, each only if its
// rev is still the cached one (revs: instance id → cached rev), and its arguments. One statement for all of them:
// rows affected tells whether every row was as cached.
//
// Each CASE walks its WHEN list for every row, so a statement's cost grows with the square of its rows: a group
// writes its rows checkedRows at a time, a statement (and round trip) each.
func checkedUpdate(tenant string, rows []instanceRow, revs map[string]int64) (string, []any) {
	cols := []string{"title", "title_i18n", "status", "context", "state", "rev", "updated_at", "ended_at", "correlation_id"}
	var b strings.Builder
	args := make([]any, 0, len(rows)*(2*len(cols)+3)+1)
	b.WriteString("UPDATE instances SET ")
	for i, col := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(col)
		b.WriteString(" = CASE id")
		for _, r := range rows {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, r.ID, instanceColumn(&r, col))
		}
		b.WriteString(" END")
	}
	b.WriteString(" WHERE id IN (")
	b.WriteString(placeholders(len(rows)))
	b.WriteString(") AND tenant_id = ? AND CASE id")
	for _, r := range rows {
		args = append(args, r.ID)
	}
	args = append(args, tenant)
	for _, r := range rows {
		b.WriteString(" WHEN ? THEN rev = ?")
		args = append(args, r.ID, revs[r.ID])
	}
	b.WriteString(" ELSE FALSE END")
	return b.String(), args
}

func instanceColumn(r *instanceRow, col string) any {
	switch col {
	case "title":
		return r.Title
	case "title_i18n":
		return r.TitleI18n
	case "status":
		return r.Status
	case "context":
		return r.Context
	case "state":
		return r.State
	case "rev":
		return r.Rev
	case "updated_at":
		return r.UpdatedAt
	case "ended_at":
		return r.EndedAt
	case "correlation_id":
		return r.CorrelationID
	}
	panic(fmt.Sprintf("store: no instance column %q", col))
}
