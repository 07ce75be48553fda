package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the scheduler shared by every replica: three keys under one hash tag, so they live in one Redis
// Cluster slot and every state move is one atomic Lua script.
//
//	<prefix>{timers}:due    zset  member = timer id, score = due time (unix ms)
//	<prefix>{timers}:lease  zset  member = timer id, score = lease deadline (unix ms)
//	<prefix>{timers}:meta   hash  field = timer id, value = "<due ms>:<deliveries>", only for timers that have
//	                              been popped and not yet acked/cancelled/re-armed (so 1M pending timers cost
//	                              nothing here)
//	<prefix>{timers}:alive  string: a sentinel whose absence tells WatchLoss that Redis lost the keys
//	<prefix>{timers}:wake:<db>  pub/sub channel: the new earliest due ms, published when a Schedule/Ensure/
//	                              recovery makes a timer due earlier than anything before. Pub/sub channels are
//	                              shared by every database of a Redis server, so the channel names the database
//	                              the keys live in: two deployments on databases 0 and 1 never wake each other.
//
// The time in every script is the caller's clock (Options.Clock), never Redis TIME, so tests can drive it.
type Redis struct {
	rdb      redis.UniversalClient
	keys     []string // due, lease, meta
	wakeCh   string
	aliveKey string // the sentinel of WatchLoss
	opts     Options
	wake     waker
	closer   closer
}

var _ Scheduler = (*Redis)(nil)

// NewRedis returns a scheduler on rdb with keys and its wake-up channel under prefix (HALLEY_REDIS_PREFIX,
// "halley:" by default; required, so that deployments sharing a Redis never share timers). The caller keeps
// ownership of rdb: Close does not close it.
func NewRedis(rdb redis.UniversalClient, prefix string, opts Options) (*Redis, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("scheduler: the Redis scheduler needs a Redis client")
	case prefix == "":
		return nil, errors.New("scheduler: the Redis scheduler needs a key prefix (HALLEY_REDIS_PREFIX)")
	}
	base := prefix + "{timers}:"
	return &Redis{
		rdb:      rdb,
		keys:     []string{base + "due", base + "lease", base + "meta"},
		wakeCh:   base + "wake:" + strconv.Itoa(redisDB(rdb)),
		aliveKey: base + "alive",
		opts:     opts.withDefaults(),
		closer:   newCloser(),
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

// Schedule implements Scheduler.Schedule.
func (r *Redis) Schedule(ctx context.Context, items ...Item) error {
	if err := r.check(items, nil); err != nil {
		return err
	}
	for start := 0; start < len(items); start += chunkSize {
		chunk := items[start:min(start+chunkSize, len(items))]
		woke, err := scheduleScript.Run(ctx, r.rdb, r.keys, r.itemArgs(chunk)...).Int()
		if err != nil {
			return fmt.Errorf("scheduler: schedule %d timers: %w", len(chunk), err)
		}
		if woke == 1 {
			r.wake.notify() // this process's Run loops wake at once; others hear the PUBLISH
		}
	}
	return nil
}

// Cancel implements Scheduler.Cancel.
func (r *Redis) Cancel(ctx context.Context, ids ...string) error {
	if err := r.check(nil, ids); err != nil {
		return err
	}
	for start := 0; start < len(ids); start += chunkSize {
		chunk := ids[start:min(start+chunkSize, len(ids))]
		if err := cancelScript.Run(ctx, r.rdb, r.keys, stringArgs(chunk)...).Err(); err != nil {
			return fmt.Errorf("scheduler: cancel %d timers: %w", len(chunk), err)
		}
	}
	return nil
}

// Ensure implements Scheduler.Ensure.
func (r *Redis) Ensure(ctx context.Context, items ...Item) (int, error) {
	if err := r.check(items, nil); err != nil {
		return 0, err
	}
	total := 0
	for start := 0; start < len(items); start += chunkSize {
		chunk := items[start:min(start+chunkSize, len(items))]
		res, err := ensureScript.Run(ctx, r.rdb, r.keys, r.itemArgs(chunk)...).Int64Slice()
		if err != nil {
			return total, fmt.Errorf("scheduler: ensure %d timers: %w", len(chunk), err)
		}
		total += int(res[0])
		if res[1] == 1 {
			r.wake.notify()
		}
	}
	return total, nil
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

// Len implements Scheduler.Len.
func (r *Redis) Len(ctx context.Context) (int, int, error) {
	if r.closer.isClosed() {
		return 0, 0, ErrClosed
	}
	var due, leased *redis.IntCmd
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		due = p.ZCard(ctx, r.keys[0])
		leased = p.ZCard(ctx, r.keys[1])
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("scheduler: len: %w", err)
	}
	return int(due.Val()), int(leased.Val()), nil
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

func (r *Redis) pop(ctx context.Context, now int64, n int, deadline int64) ([]Due, int64, error) {
	res, err := popScript.Run(ctx, r.rdb, r.keys, now, n, deadline).Slice()
	if err != nil {
		return nil, -1, fmt.Errorf("scheduler: pop: %w", err)
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

func (r *Redis) ack(ctx context.Context, ids []string, deadline int64) error {
	for start := 0; start < len(ids); start += chunkSize {
		chunk := ids[start:min(start+chunkSize, len(ids))]
		args := append([]any{deadline}, stringArgs(chunk)...)
		if err := ackScript.Run(ctx, r.rdb, r.keys[1:], args...).Err(); err != nil {
			return fmt.Errorf("scheduler: ack %d timers: %w", len(chunk), err)
		}
	}
	return nil
}

func (r *Redis) recoverExpired(ctx context.Context, now int64) (int, error) {
	total := 0
	for {
		n, err := recoverScript.Run(ctx, r.rdb, r.keys, now, chunkSize, r.wakeCh).Int()
		if err != nil {
			return total, fmt.Errorf("scheduler: recover expired leases: %w", err)
		}
		total += n
		if n < chunkSize {
			return total, nil
		}
	}
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
