package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"
)

// Locker is a gocron.Locker on Redis: SET key token NX PX ttl to take a lock, a token-checked Lua script to
// release it, so a replica whose lock already expired can never release another replica's lock.
//
// It exists because the official module (github.com/go-co-op/gocron-redis-lock) cannot be fetched in this
// build environment; it is small enough to own. Like that module it does not extend a lock while the job
// runs: TTL must exceed the job's longest run.
//
// MinHold handles gocron's "time splay": replicas fire the same job a few milliseconds apart, so a lock
// released the moment a fast job ends would let a late replica run the job a second time. Unlock therefore
// keeps the key until MinHold has passed since it was taken (measured by Redis's own TTL, so replica clocks
// do not matter).
type Locker struct {
	rdb     redis.UniversalClient
	prefix  string
	ttl     time.Duration
	minHold time.Duration
}

var _ gocron.Locker = (*Locker)(nil)

// ErrLocked is returned by Lock when another holder has the lock.
var ErrLocked = errors.New("scheduler: lock is held elsewhere")

// NewLocker returns a locker whose keys are prefix+"lock:"+job name. ttl (default 1 minute) bounds how long a
// crashed holder blocks the job; minHold (capped at ttl) is how long a lock stays taken at least.
func NewLocker(rdb redis.UniversalClient, prefix string, ttl, minHold time.Duration) *Locker {
	if ttl <= 0 {
		ttl = time.Minute
	}
	return &Locker{rdb: rdb, prefix: prefix, ttl: ttl, minHold: min(max(minHold, 0), ttl)}
}

// Lock takes the lock for key, or returns ErrLocked.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("scheduler: lock token: %w", err)
	}
	token := hex.EncodeToString(b[:])
	name := l.prefix + "lock:" + key
	ok, err := l.rdb.SetNX(ctx, name, token, l.ttl).Result()
	if err != nil {
		return nil, fmt.Errorf("scheduler: lock %q: %w", key, err)
	}
	if !ok {
		return nil, ErrLocked
	}
	return &redisLock{l: l, key: name, token: token}, nil
}

type redisLock struct {
	l     *Locker
	key   string
	token string
}

// unlockScript releases a lock only for its holder. KEYS: lock. ARGV: token, ttl ms, min hold ms.
// Returns 1 when the caller still held the lock.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local held = tonumber(ARGV[2]) - redis.call('PTTL', KEYS[1])
local rest = tonumber(ARGV[3]) - held
if rest > 0 then
  redis.call('PEXPIRE', KEYS[1], rest)
else
  redis.call('DEL', KEYS[1])
end
return 1
`)

// Unlock releases the lock (or lets it run out at MinHold). Releasing a lock that expired and was taken by
// someone else is a no-op.
func (k *redisLock) Unlock(ctx context.Context) error {
	err := unlockScript.Run(ctx, k.l.rdb, []string{k.key}, k.token, k.l.ttl.Milliseconds(), k.l.minHold.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("scheduler: unlock %q: %w", k.key, err)
	}
	return nil
}
