package scheduler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"
)

// Redis is the scheduler shared by every replica. Its timers are split over Options.Shards shards (HALLEY_TIMER_SHARDS;
// one by default); a timer's shard is a stable hash of its id. Each shard is three keys under one hash tag, so they
// live in one Redis Cluster slot and every state move is one atomic Lua script on one shard; a cluster spreads the
// shards' slots over its masters. Shard 0 has the keys of releases before sharding, so an upgrade loses nothing.
//
//	<prefix>{timers}:due        shard 0 (<prefix>{timers:N}:due for shard N > 0): zset  member = timer id,
//	                            score = due time (unix ms)
//	<prefix>{timers}:lease      zset  member = timer id, score = lease deadline (unix ms)
//	<prefix>{timers}:meta       hash  field = timer id, value = "<due ms>:<deliveries>", only for timers that have
//	                            been popped and not yet acked/cancelled/re-armed (so 1M pending timers cost
//	                            nothing here)
//	<prefix>{timers}:alive      string: a sentinel (one per shard) whose absence tells WatchLoss that Redis lost keys
//	<prefix>{timers}:shards     set: every shard count a process of this deployment has used. Every process pops
//	                            every shard of the largest count and cancels a timer in its shard under each count,
//	                            so changing HALLEY_TIMER_SHARDS across a (rolling) restart loses and duplicates nothing.
//	<prefix>{timers}:wake:<db>  pub/sub channel: the new earliest due ms, published when a Schedule/Ensure/
//	                            recovery makes a timer due earlier than anything before in its shard. Pub/sub channels
//	                            are shared by every database of a Redis server, so the channel names the database
//	                            the keys live in: two deployments on databases 0 and 1 never wake each other.
//
// The time in every script is the caller's clock (Options.Clock), never Redis TIME, so tests can drive it.
type Redis struct {
	rdb        redis.UniversalClient
	prefix     string
	shards     int // where this process puts timers
	wakeCh     string
	layoutsKey string
	layouts    layoutCache
	warned     atomic.Int64 // unix ns of the last partial-failure warning
	opts       Options
	wake       waker
	closer     closer
}

var _ Scheduler = (*Redis)(nil)

// MaxShards is the most shards a Redis scheduler may have (HALLEY_TIMER_SHARDS).
const MaxShards = 1024

// layoutRefresh is how often a process re-reads the shard counts in use, so that during a rolling change of
// HALLEY_TIMER_SHARDS the processes of the old count start popping the new shards within this time.
const layoutRefresh = 5 * time.Second

// NewRedis returns a scheduler on rdb with keys and its wake-up channel under prefix (HALLEY_REDIS_PREFIX,
// "halley:" by default; required, so that deployments sharing a Redis never share timers). rdb may be a
// *redis.Client or a *redis.ClusterClient. The caller keeps ownership of rdb: Close does not close it.
func NewRedis(rdb redis.UniversalClient, prefix string, opts Options) (*Redis, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("scheduler: the Redis scheduler needs a Redis client")
	case prefix == "":
		return nil, errors.New("scheduler: the Redis scheduler needs a key prefix (HALLEY_REDIS_PREFIX)")
	case opts.Shards < 0 || opts.Shards > MaxShards:
		return nil, fmt.Errorf("scheduler: the Redis scheduler takes 1 to %d shards (HALLEY_TIMER_SHARDS), got %d", MaxShards, opts.Shards)
	}
	opts = opts.withDefaults()
	base := prefix + "{timers}:"
	return &Redis{
		rdb:        rdb,
		prefix:     prefix,
		shards:     opts.Shards,
		wakeCh:     base + "wake:" + strconv.Itoa(redisDB(rdb)),
		layoutsKey: base + "shards",
		opts:       opts,
		closer:     newCloser(),
	}, nil
}

// redisDB is the database number rdb's keys live in (Redis Cluster has only database 0).
func redisDB(rdb redis.UniversalClient) int {
	if c, ok := rdb.(*redis.Client); ok {
		return c.Options().DB
	}
	return 0
}

// WakeChannel is the pub/sub channel the scheduler's processes wake each other on.
func (r *Redis) WakeChannel() string { return r.wakeCh }

// Shards is how many shards this scheduler puts timers in.
func (r *Redis) Shards() int { return r.shards }

// ShardKeys returns the keys of shard i: due, lease, meta and the loss sentinel.
func (r *Redis) ShardKeys(i int) []string {
	base := r.prefix + "{timers}:"
	if i > 0 {
		base = r.prefix + "{timers:" + strconv.Itoa(i) + "}:"
	}
	return []string{base + "due", base + "lease", base + "meta", base + "alive"}
}

// keys are the due, lease and meta keys of shard i, as the scripts take them.
func (r *Redis) keys(i int) []string { return r.ShardKeys(i)[:3] }

// ShardOf is the shard a timer id belongs to among n shards: FNV-1a of the id, modulo n.
func ShardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n)) //nolint:gosec // G115: n is at most MaxShards
}

// luaLib is prepended to every script. Scripts call Redis once per command with many members rather than
// once per timer (a redis.call costs about a microsecond), in slices that stay under Lua's unpack limit.
const luaLib = `
local function bulk(cmd, key, args)
  for i = 1, #args, 1000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 999, #args)))
  end
end
`

// scheduleScript adds or moves timers. KEYS: due, lease, meta. ARGV: wake channel, then (score, id) pairs.
// A re-armed timer leaves the lease set and loses its delivery count: it is a new occurrence.
// Returns 1 when the earliest new score is earlier than the previous head (after publishing it), else 0.
var scheduleScript = redis.NewScript(luaLib + `
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local zargs, ids, earliest = {}, {}, nil
for i = 2, #ARGV, 2 do
  local score = tonumber(ARGV[i])
  zargs[#zargs+1] = score
  zargs[#zargs+1] = ARGV[i+1]
  ids[#ids+1] = ARGV[i+1]
  if earliest == nil or score < earliest then earliest = score end
end
if earliest == nil then return 0 end
bulk('ZADD', KEYS[1], zargs)
bulk('ZREM', KEYS[2], ids)
bulk('HDEL', KEYS[3], ids)
if head[2] == nil or earliest < tonumber(head[2]) then
  redis.call('PUBLISH', ARGV[1], string.format('%d', earliest))
  return 1
end
return 0
`)

// ensureScript adds the timers that are in neither the due nor the lease set. KEYS/ARGV as scheduleScript.
// Returns {added, woke}.
var ensureScript = redis.NewScript(luaLib + `
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local ids = {}
for i = 2, #ARGV, 2 do ids[#ids+1] = ARGV[i+1] end
if #ids == 0 then return {0, 0} end
local inDue = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local inLease = redis.call('ZMSCORE', KEYS[2], unpack(ids))
local zargs, added, seen, earliest = {}, {}, {}, nil
for k, id in ipairs(ids) do
  if not inDue[k] and not inLease[k] and not seen[id] then
    seen[id] = true
    local score = tonumber(ARGV[2*k])
    zargs[#zargs+1] = score
    zargs[#zargs+1] = id
    added[#added+1] = id
    if earliest == nil or score < earliest then earliest = score end
  end
end
if #added == 0 then return {0, 0} end
bulk('ZADD', KEYS[1], zargs)
bulk('HDEL', KEYS[3], added)
if head[2] == nil or earliest < tonumber(head[2]) then
  redis.call('PUBLISH', ARGV[1], string.format('%d', earliest))
  return {#added, 1}
end
return {#added, 0}
`)

// cancelScript removes timers from every key. KEYS: due, lease, meta. ARGV: ids.
var cancelScript = redis.NewScript(luaLib + `
bulk('ZREM', KEYS[1], ARGV)
bulk('ZREM', KEYS[2], ARGV)
bulk('HDEL', KEYS[3], ARGV)
return #ARGV
`)

// popScript leases up to n due timers. KEYS: due, lease, meta. ARGV: now ms, n, lease deadline ms.
// Returns {next due score or an empty string, id1, due1, attempt1, id2, ...} in due order.
var popScript = redis.NewScript(luaLib + `
local found = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {''}
if #found > 0 then
  local ids = {}
  for i = 1, #found, 2 do ids[#ids+1] = found[i] end
  local metas = redis.call('HMGET', KEYS[3], unpack(ids))
  local leases, metaArgs = {}, {}
  for k, id in ipairs(ids) do
    local due, attempt = found[2*k], 1
    if metas[k] then
      local n = string.match(metas[k], ':(%d+)$')
      if n then attempt = tonumber(n) + 1 end
    end
    leases[#leases+1] = ARGV[3]
    leases[#leases+1] = id
    metaArgs[#metaArgs+1] = id
    metaArgs[#metaArgs+1] = due .. ':' .. attempt
    out[#out+1] = id
    out[#out+1] = due
    out[#out+1] = attempt
  end
  -- the popped timers are exactly the lowest ranks of the set: drop them in one O(log N + k) step
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, #ids - 1)
  bulk('ZADD', KEYS[2], leases)
  bulk('HSET', KEYS[3], metaArgs)
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if head[2] then out[1] = head[2] end
return out
`)

// ackScript removes timers from the lease set if their lease is still the one that ends at the given deadline:
// a timer re-armed by Schedule, or re-leased after its lease expired, is not the caller's to remove.
// KEYS: lease, meta. ARGV: deadline ms, ids.
var ackScript = redis.NewScript(luaLib + `
local deadline = tonumber(ARGV[1])
local ids = {}
for i = 2, #ARGV do ids[#ids+1] = ARGV[i] end
if #ids == 0 then return 0 end
local scores = redis.call('ZMSCORE', KEYS[1], unpack(ids))
local mine = {}
for k, id in ipairs(ids) do
  if scores[k] and tonumber(scores[k]) == deadline then mine[#mine+1] = id end
end
if #mine > 0 then
  bulk('ZREM', KEYS[1], mine)
  bulk('HDEL', KEYS[2], mine)
end
return #mine
`)

// recoverScript moves up to n expired leases back to the due set at their original due time; the meta entry
// stays, so the next pop counts the attempt. KEYS: due, lease, meta. ARGV: now ms, n, wake channel.
var recoverScript = redis.NewScript(luaLib + `
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids == 0 then return 0 end
local metas = redis.call('HMGET', KEYS[3], unpack(ids))
local zargs = {}
for k, id in ipairs(ids) do
  local due = ARGV[1]
  if metas[k] then
    local d = string.match(metas[k], '^(%-?%d+):')
    if d then due = d end
  end
  zargs[#zargs+1] = due
  zargs[#zargs+1] = id
end
bulk('ZADD', KEYS[1], zargs)
bulk('ZREM', KEYS[2], ids)
redis.call('PUBLISH', ARGV[3], ARGV[1])
return #ids
`)

// heldScript returns the ids that are in the due or the lease set. KEYS: due, lease. ARGV: ids.
var heldScript = redis.NewScript(`
local inDue = redis.call('ZMSCORE', KEYS[1], unpack(ARGV))
local inLease = redis.call('ZMSCORE', KEYS[2], unpack(ARGV))
local out = {}
for k, id in ipairs(ARGV) do
  if inDue[k] or inLease[k] then out[#out+1] = id end
end
return out
`)

// Schedule implements Scheduler.Schedule. A timer goes to its shard under this process's count; under another
// count in use it may sit elsewhere (scheduled before HALLEY_TIMER_SHARDS changed), and is removed there after it
// is in its new place.
func (r *Redis) Schedule(ctx context.Context, items ...Item) error {
	if err := r.check(items, nil); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	counts, err := r.counts(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: schedule %d timers: %w", len(items), err)
	}
	groups := map[int][]Item{}
	for _, it := range items {
		sh := ShardOf(it.ID, r.shards)
		groups[sh] = append(groups[sh], it)
	}
	err = eachShard(ctx, mapKeys(groups), func(ctx context.Context, sh int) error {
		group := groups[sh]
		for start := 0; start < len(group); start += chunkSize {
			chunk := group[start:min(start+chunkSize, len(group))]
			woke, err := scheduleScript.Run(ctx, r.rdb, r.keys(sh), r.itemArgs(chunk)...).Int()
			if err != nil {
				return fmt.Errorf("scheduler: schedule %d timers: %w", len(chunk), err)
			}
			if woke == 1 {
				r.wake.notify() // this process's Run loops wake at once; others hear the PUBLISH
			}
		}
		return nil
	})
	if err != nil || len(counts) == 1 {
		return err
	}
	stale := map[int][]string{}
	for _, it := range items {
		for _, sh := range r.places(it.ID, counts)[1:] {
			stale[sh] = append(stale[sh], it.ID)
		}
	}
	return r.cancelIn(ctx, stale)
}

// Cancel implements Scheduler.Cancel: every shard the timer may be in.
func (r *Redis) Cancel(ctx context.Context, ids ...string) error {
	if err := r.check(nil, ids); err != nil {
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	counts, err := r.counts(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: cancel %d timers: %w", len(ids), err)
	}
	groups := map[int][]string{}
	for _, id := range ids {
		for _, sh := range r.places(id, counts) {
			groups[sh] = append(groups[sh], id)
		}
	}
	return r.cancelIn(ctx, groups)
}

func (r *Redis) cancelIn(ctx context.Context, groups map[int][]string) error {
	return eachShard(ctx, mapKeys(groups), func(ctx context.Context, sh int) error {
		group := groups[sh]
		for start := 0; start < len(group); start += chunkSize {
			chunk := group[start:min(start+chunkSize, len(group))]
			if err := cancelScript.Run(ctx, r.rdb, r.keys(sh), stringArgs(chunk)...).Err(); err != nil {
				return fmt.Errorf("scheduler: cancel %d timers: %w", len(chunk), err)
			}
		}
		return nil
	})
}

// Ensure implements Scheduler.Ensure. A timer due or leased in any shard it may be in is left alone.
func (r *Redis) Ensure(ctx context.Context, items ...Item) (int, error) {
	if err := r.check(items, nil); err != nil {
		return 0, err
	}
	if len(items) == 0 {
		return 0, nil
	}
	counts, err := r.counts(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduler: ensure %d timers: %w", len(items), err)
	}
	if len(counts) > 1 {
		if items, err = r.notHeldElsewhere(ctx, items, counts); err != nil {
			return 0, err
		}
	}
	groups := map[int][]Item{}
	for _, it := range items {
		sh := ShardOf(it.ID, r.shards)
		groups[sh] = append(groups[sh], it)
	}
	var mu sync.Mutex
	total := 0
	err = eachShard(ctx, mapKeys(groups), func(ctx context.Context, sh int) error {
		group := groups[sh]
		for start := 0; start < len(group); start += chunkSize {
			chunk := group[start:min(start+chunkSize, len(group))]
			res, err := ensureScript.Run(ctx, r.rdb, r.keys(sh), r.itemArgs(chunk)...).Int64Slice()
			if err != nil {
				return fmt.Errorf("scheduler: ensure %d timers: %w", len(chunk), err)
			}
			mu.Lock()
			total += int(res[0])
			mu.Unlock()
			if res[1] == 1 {
				r.wake.notify()
			}
		}
		return nil
	})
	return total, err
}

// notHeldElsewhere drops the items that are due or leased in a shard of another count in use.
func (r *Redis) notHeldElsewhere(ctx context.Context, items []Item, counts []int) ([]Item, error) {
	groups := map[int][]string{}
	for _, it := range items {
		for _, sh := range r.places(it.ID, counts)[1:] {
			groups[sh] = append(groups[sh], it.ID)
		}
	}
	var mu sync.Mutex
	held := map[string]bool{}
	err := eachShard(ctx, mapKeys(groups), func(ctx context.Context, sh int) error {
		group := groups[sh]
		for start := 0; start < len(group); start += chunkSize {
			chunk := group[start:min(start+chunkSize, len(group))]
			found, err := heldScript.Run(ctx, r.rdb, r.keys(sh)[:2], stringArgs(chunk)...).StringSlice()
			if err != nil {
				return fmt.Errorf("scheduler: ensure: look for %d timers in shard %d: %w", len(chunk), sh, err)
			}
			mu.Lock()
			for _, id := range found {
				held[id] = true
			}
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := items[:0:0]
	for _, it := range items {
		if !held[it.ID] {
			out = append(out, it)
		}
	}
	return out, nil
}

// Run delivers due timers to h. It subscribes to the wake channel first, so a timer scheduled by another
// process as the new earliest wakes this loop within milliseconds instead of after MaxIdle.
func (r *Redis) Run(ctx context.Context, h Handler) error {
	if r.closer.isClosed() {
		return ErrClosed
	}
	if h == nil {
		return fmt.Errorf("scheduler: Run needs a handler")
	}
	sub := r.rdb.Subscribe(ctx, r.wakeCh)
	defer sub.Close() //nolint:errcheck // unsubscribing at the end of Run: nothing is lost if it fails
	// Wait for the subscription to be confirmed, so nothing published after Run has started is missed; if
	// Redis is down, carry on: the loop retries pops and MaxIdle bounds the lateness until it is back.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if _, err := sub.Receive(rctx); err != nil && ctx.Err() == nil {
		r.opts.Logger.Warn("scheduler: subscribing to wake-ups failed; falling back to MaxIdle polling",
			"channel", r.wakeCh, "err", err)
	}
	cancel()
	msgs := sub.Channel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case _, ok := <-msgs:
				if !ok {
					return
				}
				r.wake.notify()
			case <-done:
				return
			}
		}
	}()
	return runLoop(ctx, r, r.opts, &r.wake, r.closer.done, h)
}

// Len implements Scheduler.Len, over every shard in use.
func (r *Redis) Len(ctx context.Context) (int, int, error) {
	if r.closer.isClosed() {
		return 0, 0, ErrClosed
	}
	counts, err := r.counts(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("scheduler: len: %w", err)
	}
	n := slices.Max(counts)
	due, leased := make([]*redis.IntCmd, n), make([]*redis.IntCmd, n)
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range n {
			k := r.keys(sh)
			due[sh] = p.ZCard(ctx, k[0])
			leased[sh] = p.ZCard(ctx, k[1])
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("scheduler: len: %w", err)
	}
	d, l := 0, 0
	for sh := range n {
		d += int(due[sh].Val())
		l += int(leased[sh].Val())
	}
	return d, l, nil
}

// Ping implements Scheduler.Ping.
func (r *Redis) Ping(ctx context.Context) error {
	if r.closer.isClosed() {
		return ErrClosed
	}
	if err := r.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("scheduler: ping redis: %w", err)
	}
	return nil
}

// Close implements Scheduler.Close.
func (r *Redis) Close() error {
	r.closer.close()
	return nil
}

func (r *Redis) check(items []Item, ids []string) error {
	if r.closer.isClosed() {
		return ErrClosed
	}
	if err := validateItems(items); err != nil {
		return err
	}
	return validateIDs(ids)
}

func (r *Redis) itemArgs(items []Item) []any {
	args := make([]any, 0, 1+2*len(items))
	args = append(args, r.wakeCh)
	for _, it := range items {
		args = append(args, toMs(it.Due), it.ID)
	}
	return args
}

func stringArgs(ss []string) []any {
	args := make([]any, len(ss))
	for i, s := range ss {
		args[i] = s
	}
	return args
}

// layoutCache is what a process knows of the shard counts in use.
type layoutCache struct {
	mu     sync.Mutex
	counts []int // sorted, this process's own included
	at     time.Time
}

// counts returns the shard counts this deployment's processes use or used, this process's own among them. It
// records this process's count in Redis and re-reads the set at most every layoutRefresh; when Redis does not
// answer, the last known counts do.
func (r *Redis) counts(ctx context.Context) ([]int, error) {
	r.layouts.mu.Lock()
	defer r.layouts.mu.Unlock()
	now := r.opts.Clock.Now()
	if c := r.layouts.counts; c != nil && now.Sub(r.layouts.at) < layoutRefresh && !now.Before(r.layouts.at) {
		return c, nil
	}
	k := r.keys(0)
	members, err := registerScript.Run(ctx, r.rdb, []string{r.layoutsKey, k[0], k[1]}, r.shards).StringSlice()
	if err != nil {
		if r.layouts.counts != nil {
			return r.layouts.counts, nil
		}
		return nil, fmt.Errorf("read the shard counts in %s: %w", r.layoutsKey, err)
	}
	counts := []int{r.shards}
	for _, m := range members {
		if n, err := strconv.Atoi(m); err == nil && n >= 1 && n <= MaxShards && n != r.shards {
			counts = append(counts, n)
		}
	}
	slices.Sort(counts)
	if !slices.Equal(counts, r.layouts.counts) && len(counts) > 1 {
		r.opts.Logger.Info("scheduler: timers are in shards of several counts (HALLEY_TIMER_SHARDS changed); every shard is popped",
			"shards", r.shards, "counts_in_use", counts)
	}
	r.layouts.counts, r.layouts.at = counts, now
	return counts, nil
}

// registerScript records a process's shard count and returns every count in use. Shard 0's keys without the set
// of counts beside them (they share a slot, so they are lost together) were written by a release before
// sharding: count 1 is in use then. KEYS: the set of counts, shard 0's due and lease. ARGV: the count.
var registerScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
  redis.call('SADD', KEYS[1], '1')
end
redis.call('SADD', KEYS[1], ARGV[1])
return redis.call('SMEMBERS', KEYS[1])
`)

// places are the shards a timer may be in: its shard under this process's count first, then its shard under each
// other count in use, without repeats.
func (r *Redis) places(id string, counts []int) []int {
	out := []int{ShardOf(id, r.shards)}
	for _, n := range counts {
		if sh := ShardOf(id, n); !slices.Contains(out, sh) {
			out = append(out, sh)
		}
	}
	return out
}

func (r *Redis) pop(ctx context.Context, now int64, n int, deadline int64) ([]Due, int64, error) {
	counts, err := r.counts(ctx)
	if err != nil {
		return nil, -1, fmt.Errorf("scheduler: pop: %w", err)
	}
	shards := slices.Max(counts)
	if shards == 1 {
		return r.popShard(ctx, 0, now, n, deadline)
	}
	// Peek at the first n timers of every shard and pop the n earliest of them, so that one loop delivers in due
	// order across shards as it does within one. Another process may take some meanwhile: each shard's pop is
	// atomic, so then this one gets the next due ones of that shard, or fewer, never a timer twice.
	heads := make([]*redis.ZSliceCmd, shards)
	_, err = r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range shards {
			heads[sh] = p.ZRangeWithScores(ctx, r.keys(sh)[0], 0, int64(n-1))
		}
		return nil
	})
	// A cluster master that is down fails only its shards' peeks: the others are popped meanwhile.
	var failed []int
	for sh, cmd := range heads {
		if cmd.Err() != nil {
			failed = append(failed, sh)
		}
	}
	if len(failed) == shards || (err != nil && len(failed) == 0) {
		return nil, -1, fmt.Errorf("scheduler: pop: peek: %w", err)
	}
	if len(failed) > 0 {
		r.warnShards("scheduler: shards unreachable; popping the others", failed, err)
	}
	type candidate struct {
		shard int
		score int64
		id    string
	}
	var due []candidate
	next := int64(-1)
	earlier := func(score int64) {
		if score >= 0 && (next < 0 || score < next) {
			next = score
		}
	}
	for sh, cmd := range heads {
		if cmd.Err() != nil {
			continue
		}
		for _, z := range cmd.Val() {
			score := int64(z.Score)
			if score > now {
				earlier(score)
				break
			}
			id, _ := z.Member.(string)
			due = append(due, candidate{sh, score, id})
		}
	}
	if len(due) == 0 {
		return nil, next, nil
	}
	slices.SortFunc(due, func(a, b candidate) int {
		if a.score != b.score {
			return cmp.Compare(a.score, b.score)
		}
		return strings.Compare(a.id, b.id)
	})
	take := map[int]int{}
	for _, c := range due[:min(n, len(due))] {
		take[c.shard]++
	}
	for _, c := range due[min(n, len(due)):] {
		if take[c.shard] == 0 {
			earlier(c.score) // due but not taken: the loop comes back at once
		}
	}
	var mu sync.Mutex
	var batch []Due
	err = eachShard(ctx, mapKeys(take), func(ctx context.Context, sh int) error {
		got, head, err := r.popShard(ctx, sh, now, take[sh], deadline)
		mu.Lock()
		defer mu.Unlock()
		batch = append(batch, got...)
		earlier(head)
		return err
	})
	slices.SortFunc(batch, func(a, b Due) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if err != nil && len(batch) == 0 {
		return nil, -1, err
	}
	// Timers leased by the shards that answered are handed over even if another shard failed: dropping them
	// would leave them leased until the lease expires. The failed shard is popped again on the next round.
	if err != nil {
		r.warnShards("scheduler: popping a shard failed; the others' timers are delivered", nil, err)
	}
	return batch, next, nil
}

// shardWarnEvery bounds how often a pop logs shards it could not reach: a loop pops many times a second.
const shardWarnEvery = 10 * time.Second

// warnShards logs a partial failure at most every shardWarnEvery.
func (r *Redis) warnShards(msg string, shards []int, err error) {
	now := time.Now().UnixNano()
	last := r.warned.Load()
	if now-last < int64(shardWarnEvery) || !r.warned.CompareAndSwap(last, now) {
		return
	}
	r.opts.Logger.Warn(msg, "shards", shards, "err", err)
}

func (r *Redis) popShard(ctx context.Context, sh int, now int64, n int, deadline int64) ([]Due, int64, error) {
	res, err := popScript.Run(ctx, r.rdb, r.keys(sh), now, n, deadline).Slice()
	if err != nil {
		return nil, -1, fmt.Errorf("scheduler: pop shard %d: %w", sh, err)
	}
	if len(res) == 0 || (len(res)-1)%3 != 0 {
		return nil, -1, fmt.Errorf("scheduler: pop: unexpected reply of %d elements", len(res))
	}
	next := int64(-1)
	if s, _ := res[0].(string); s != "" {
		if next, err = parseScore(s); err != nil {
			return nil, -1, fmt.Errorf("scheduler: pop: next score: %w", err)
		}
	}
	batch := make([]Due, 0, (len(res)-1)/3)
	for i := 1; i+2 < len(res); i += 3 {
		id, _ := res[i].(string)
		ds, _ := res[i+1].(string)
		attempt, _ := res[i+2].(int64)
		due, err := parseScore(ds)
		if err != nil {
			return nil, -1, fmt.Errorf("scheduler: pop: score of %q: %w", id, err)
		}
		batch = append(batch, Due{ID: id, Due: fromMs(due), Attempt: int(attempt)})
	}
	return batch, next, nil
}

// ack removes the acked timers from their lease sets. A timer is acked in every shard it may be in: the script
// removes it only where its lease still ends at deadline, which is the shard it was popped from.
func (r *Redis) ack(ctx context.Context, ids []string, deadline int64) error {
	counts, err := r.counts(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: ack %d timers: %w", len(ids), err)
	}
	groups := map[int][]string{}
	for _, id := range ids {
		for _, sh := range r.places(id, counts) {
			groups[sh] = append(groups[sh], id)
		}
	}
	return eachShard(ctx, mapKeys(groups), func(ctx context.Context, sh int) error {
		group := groups[sh]
		for start := 0; start < len(group); start += chunkSize {
			chunk := group[start:min(start+chunkSize, len(group))]
			args := append([]any{deadline}, stringArgs(chunk)...)
			if err := ackScript.Run(ctx, r.rdb, r.keys(sh)[1:], args...).Err(); err != nil {
				return fmt.Errorf("scheduler: ack %d timers: %w", len(chunk), err)
			}
		}
		return nil
	})
}

// recoverExpired puts expired leases back as due, in every shard in use.
func (r *Redis) recoverExpired(ctx context.Context, now int64) (int, error) {
	counts, err := r.counts(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduler: recover expired leases: %w", err)
	}
	var total atomic.Int64
	err = eachShard(ctx, shardRange(slices.Max(counts)), func(ctx context.Context, sh int) error {
		for {
			n, err := recoverScript.Run(ctx, r.rdb, r.keys(sh), now, chunkSize, r.wakeCh).Int()
			if err != nil {
				return fmt.Errorf("scheduler: recover expired leases in shard %d: %w", sh, err)
			}
			total.Add(int64(n))
			if n < chunkSize {
				return nil
			}
		}
	})
	return int(total.Load()), err
}

// maxShardCalls bounds the shards one call works on at once.
const maxShardCalls = 16

// eachShard runs fn for every shard, several at once: on a cluster the shards' masters work in parallel.
func eachShard(ctx context.Context, shards []int, fn func(ctx context.Context, shard int) error) error {
	if len(shards) == 1 {
		return fn(ctx, shards[0])
	}
	var g errgroup.Group
	g.SetLimit(maxShardCalls)
	for _, sh := range shards {
		g.Go(func() error { return fn(ctx, sh) })
	}
	return g.Wait()
}

func mapKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func shardRange(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// parseScore reads a sorted-set score; Redis prints integral scores below 2^53 as plain integers.
func parseScore(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return int64(f), nil
}
