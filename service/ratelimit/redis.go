package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Counter shared by every replica: one sorted set per key, score = attempt time (unix ms, from the
// caller's clock), member = attempt id. Keys are <prefix>{rl}:<key>; the hash tag puts every key of this counter
// in one Redis Cluster slot, so one script can check and add under several keys atomically. Each key expires a
// window after its last attempt (real time: it only collects garbage; the window itself is counted by score).
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
	window time.Duration
}

// NewRedis returns a counter over window with keys under prefix (HALLEY_REDIS_PREFIX: every deployment sharing a
// Redis has its own, so their counters never mix).
func NewRedis(rdb redis.UniversalClient, prefix string, window time.Duration) (*Redis, error) {
	switch {
	case rdb == nil:
		return nil, errors.New("ratelimit: a Redis counter needs a Redis client")
	case prefix == "":
		return nil, errors.New("ratelimit: a Redis counter needs a key prefix (HALLEY_REDIS_PREFIX)")
	case window <= 0:
		return nil, fmt.Errorf("ratelimit: the window must be positive, got %v", window)
	}
	return &Redis{rdb: rdb, prefix: prefix, window: window}, nil
}

var _ Counter = (*Redis)(nil)

// Key is the Redis key of a counter key (tests and docs).
func (r *Redis) Key(key string) string { return r.prefix + "{rl}:" + key }

// takeScript: KEYS = the rules' keys; ARGV = now ms, window ms, member, then one limit per key. It prunes every
// key to the window, and either returns the ms to wait (some key is at its limit: the oldest attempt that keeps
// it there must leave the window) or adds the attempt under every key and returns 0.
var takeScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local wait = 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local limit = tonumber(ARGV[3 + i])
  local n = redis.call('ZCARD', key)
  if n >= limit then
    local oldest = redis.call('ZRANGE', key, n - limit, n - limit, 'WITHSCORES')
    local w = tonumber(oldest[2]) + window - now
    if w > wait then wait = w end
  end
end
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[3])
  redis.call('PEXPIRE', key, window)
end
return 0
`)

// Take implements Counter.
func (r *Redis) Take(ctx context.Context, rules []Rule, now time.Time) (string, time.Duration, error) {
	if len(rules) == 0 {
		return "", 0, nil
	}
	id := newID()
	keys := make([]string, len(rules))
	args := []any{now.UnixMilli(), r.window.Milliseconds(), id}
	for i, rl := range rules {
		keys[i] = r.Key(rl.Key)
		args = append(args, strconv.Itoa(rl.Limit))
	}
	ms, err := takeScript.Run(ctx, r.rdb, keys, args...).Int64()
	if err != nil {
		return "", 0, fmt.Errorf("ratelimit: unable to count an attempt in redis: %w", err)
	}
	if ms > 0 {
		return "", time.Duration(ms) * time.Millisecond, nil
	}
	return id, 0, nil
}

// Give implements Counter.
func (r *Redis) Give(ctx context.Context, id string, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.ZRem(ctx, r.Key(k), id)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ratelimit: unable to give an attempt back in redis: %w", err)
	}
	return nil
}

// Reset implements Counter.
func (r *Redis) Reset(ctx context.Context, key string) error {
	if err := r.rdb.Del(ctx, r.Key(key)).Err(); err != nil {
		return fmt.Errorf("ratelimit: unable to reset %s in redis: %w", key, err)
	}
	return nil
}
