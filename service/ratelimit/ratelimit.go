// Package ratelimit counts attempts over a sliding window, per key, in this process or in Redis (shared by every
// replica). Login throttling builds on it: an attempt is taken before a password is checked and given back when
// the password was right, so that concurrent guesses cannot slip past the limit. Buckets, a token bucket per key
// in this process, limits a rate instead (API trigger calls per client IP).
package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"sync"
	"time"
)

// Rule allows at most Limit attempts under Key within the counter's window.
type Rule struct {
	Key   string
	Limit int
}

// Counter counts attempts. Times are the caller's clock (a fake one in tests), never the counter's.
type Counter interface {
	// Take records one attempt under the key of every rule, unless a rule's key already holds Limit attempts in
	// the window ending at now: then it records nothing and returns how long until every rule would allow one.
	// The id names the attempt for Give.
	Take(ctx context.Context, rules []Rule, now time.Time) (id string, retry time.Duration, err error)
	// Give removes attempt id from the keys (it did not count: the password was right).
	Give(ctx context.Context, id string, keys ...string) error
	// Reset forgets every attempt under key.
	Reset(ctx context.Context, key string) error
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// retryAfter is how long until a key holding times (ascending, within the window) allows another attempt: until
// the oldest attempt that keeps it at the limit leaves the window.
func retryAfter(times []time.Time, limit int, window time.Duration, now time.Time) time.Duration {
	if len(times) < limit {
		return 0
	}
	return times[len(times)-limit].Add(window).Sub(now)
}

// Memory is a Counter in this process (one replica, or none shared). It keeps at most MaxKeys keys: past that,
// keys whose attempts all left the window are dropped, and if that is not enough every key is (which only
// forgives; it takes a spray of more keys than that within one window to cause).
type Memory struct {
	window  time.Duration
	maxKeys int

	mu   sync.Mutex
	keys map[string][]attempt
}

type attempt struct {
	id string
	at time.Time
}

// NewMemory returns an in-process counter over window; maxKeys <= 0 means 100,000.
func NewMemory(window time.Duration, maxKeys int) *Memory {
	if maxKeys <= 0 {
		maxKeys = 100_000
	}
	return &Memory{window: window, maxKeys: maxKeys, keys: map[string][]attempt{}}
}

var _ Counter = (*Memory)(nil)

// recent drops key's attempts that left the window and returns the rest (oldest first).
func (m *Memory) recent(key string, now time.Time) []attempt {
	as := m.keys[key]
	cut := now.Add(-m.window)
	i := sort.Search(len(as), func(i int) bool { return as[i].at.After(cut) })
	if i > 0 {
		as = append(as[:0:0], as[i:]...)
		if len(as) == 0 {
			delete(m.keys, key)
		} else {
			m.keys[key] = as
		}
	}
	return as
}

// Take implements Counter.
func (m *Memory) Take(_ context.Context, rules []Rule, now time.Time) (string, time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var wait time.Duration
	for _, r := range rules {
		as := m.recent(r.Key, now)
		times := make([]time.Time, len(as))
		for i, a := range as {
			times[i] = a.at
		}
		wait = max(wait, retryAfter(times, r.Limit, m.window, now))
	}
	if wait > 0 {
		return "", wait, nil
	}
	if len(m.keys)+len(rules) > m.maxKeys {
		for k := range m.keys {
			m.recent(k, now)
		}
		if len(m.keys)+len(rules) > m.maxKeys {
			clear(m.keys)
		}
	}
	id := newID()
	for _, r := range rules {
		as := m.keys[r.Key]
		// Attempts arrive in clock order but a caller's clock may step back; keep each key sorted.
		i := sort.Search(len(as), func(i int) bool { return as[i].at.After(now) })
		as = append(as, attempt{})
		copy(as[i+1:], as[i:])
		as[i] = attempt{id: id, at: now}
		m.keys[r.Key] = as
	}
	return id, 0, nil
}

// Give implements Counter.
func (m *Memory) Give(_ context.Context, id string, keys ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		as := m.keys[k]
		for i, a := range as {
			if a.id == id {
				as = append(as[:i:i], as[i+1:]...)
				break
			}
		}
		if len(as) == 0 {
			delete(m.keys, k)
		} else {
			m.keys[k] = as
		}
	}
	return nil
}

// Reset implements Counter.
func (m *Memory) Reset(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, key)
	return nil
}

// Len is the number of keys held (tests, metrics).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.keys)
}
