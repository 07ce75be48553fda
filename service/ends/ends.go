// Package ends tells every replica when an instance ends, through Redis pub/sub under HALLEY_REDIS_PREFIX, so that
// a sync API start waiting on one replica hears at once of an end committed by another (without Redis, or while
// the subscription is down, the wait polls the database instead). A message is only a hint to read the instance:
// losing one costs the waiter a poll, never a wrong answer.
package ends

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bus publishes the ends committed by this process and hears those of every replica. Run keeps its subscription;
// Publish and Listen may be called before Run starts (they then publish nothing and hear nothing).
type Bus struct {
	rdb     redis.UniversalClient
	channel string
	log     *slog.Logger

	out chan string // ends to publish, drained by Run

	mu        sync.Mutex
	live      bool
	listeners map[string][]chan struct{}
}

// Options tune a Bus; the zero value is the default.
type Options struct {
	Logger *slog.Logger
	// Queue is how many ends may wait to be published (default 4096); past it an end is not published (its
	// waiters, if any, find it at their next poll).
	Queue int
}

// New returns a bus on the channel <prefix>ends:<db> (prefix: HALLEY_REDIS_PREFIX; db: the client's database
// number, since pub/sub channels are shared by every database of a server), so deployments sharing a Redis never
// hear each other.
func New(rdb redis.UniversalClient, prefix string, opts Options) (*Bus, error) {
	if rdb == nil {
		return nil, errors.New("ends: the bus needs a Redis client")
	}
	if prefix == "" {
		return nil, errors.New("ends: the bus needs a key prefix (HALLEY_REDIS_PREFIX)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Queue <= 0 {
		opts.Queue = 4096
	}
	return &Bus{rdb: rdb, channel: prefix + "ends:" + strconv.Itoa(redisDB(rdb)), log: opts.Logger, out: make(chan string, opts.Queue), listeners: map[string][]chan struct{}{}}, nil
}

func redisDB(rdb redis.UniversalClient) int {
	if c, ok := rdb.(*redis.Client); ok {
		return c.Options().DB
	}
	return 0
}

// Channel is the Redis channel of the bus (docs, tests).
func (b *Bus) Channel() string { return b.channel }

// Publish tells every replica that instance id ended (called after the end committed). It does not wait for
// Redis.
func (b *Bus) Publish(id string) {
	select {
	case b.out <- id:
	default:
		b.log.Debug("the instance end queue is full; waiters on other replicas find this end at their next poll", "instance_id", id)
	}
}

// Listen returns a channel closed when an end of instance id is heard, or when the subscription drops (then the
// caller reads the instance and polls), and a func to stop listening. ok is false, and the channel nil, when the
// subscription is not live: the caller polls.
func (b *Bus) Listen(id string) (heard <-chan struct{}, stop func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.live {
		return nil, func() {}, false
	}
	ch := make(chan struct{})
	b.listeners[id] = append(b.listeners[id], ch)
	return ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		cs := b.listeners[id]
		for i, c := range cs {
			if c == ch {
				b.listeners[id] = append(cs[:i], cs[i+1:]...)
				break
			}
		}
		if len(b.listeners[id]) == 0 {
			delete(b.listeners, id)
		}
	}, true
}

// Live reports whether the subscription is live (tests, /readyz-like checks).
func (b *Bus) Live() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live
}

// wake closes the listeners of id (every listener when id is ""), which hear once.
func (b *Bus) wake(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id == "" {
		for _, cs := range b.listeners {
			for _, c := range cs {
				close(c)
			}
		}
		clear(b.listeners)
		return
	}
	for _, c := range b.listeners[id] {
		close(c)
	}
	delete(b.listeners, id)
}

func (b *Bus) setLive(live bool) {
	b.mu.Lock()
	was := b.live
	b.live = live
	b.mu.Unlock()
	if was && !live {
		b.wake("") // they poll from now on
	}
}

// pingEvery is how often the subscription is checked with a PING.
const pingEvery = 15 * time.Second

// Run subscribes and publishes until ctx is done. A lost subscription is retried (1 s, doubling up to 30 s); in
// the meantime waits poll.
func (b *Bus) Run(ctx context.Context) error {
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		b.publish(ctx)
	}()
	defer func() { <-pubDone }()
	retry := time.Second
	for ctx.Err() == nil {
		if b.subscribe(ctx) {
			retry = time.Second
		}
		if ctx.Err() != nil {
			break
		}
		b.log.Warn("the subscription to instance ends in redis dropped; sync API waits poll the database until it is back", "retry_in", retry)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
		retry = min(2*retry, 30*time.Second)
	}
	return nil
}

// subscribe holds one subscription until it fails or ctx is done; it reports whether it was ever live.
func (b *Bus) subscribe(ctx context.Context) (wasLive bool) {
	ps := b.rdb.Subscribe(ctx, b.channel)
	// A blocked Receive does not watch ctx: closing the subscription ends it.
	over := make(chan struct{})
	closed := make(chan struct{})
	// A connection that died without a word (no RST) would keep Receive blocked and the bus "live": PING it, and
	// close it when no PONG came back within pingEvery*3.
	var lastPong atomic.Int64
	lastPong.Store(time.Now().UnixNano())
	go func() {
		defer close(closed)
		tick := time.NewTicker(pingEvery)
		defer tick.Stop()
	wait:
		for {
			select {
			case <-ctx.Done():
				break wait
			case <-over:
				break wait
			case <-tick.C:
				if time.Since(time.Unix(0, lastPong.Load())) > 3*pingEvery {
					b.log.Warn("no answer on the subscription to instance ends in redis; reconnecting")
					break wait
				}
				_ = ps.Ping(ctx) // its PONG comes through Receive; an error shows as a missing PONG
			}
		}
		_ = ps.Close() // the subscription is over either way
	}()
	defer func() {
		b.setLive(false)
		close(over)
		<-closed
	}()
	for {
		msg, err := ps.Receive(ctx)
		if err != nil {
			return wasLive
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == b.channel {
				wasLive = true
				b.setLive(true)
			}
		case *redis.Message:
			b.wake(m.Payload)
		case *redis.Pong:
			lastPong.Store(time.Now().UnixNano())
		}
	}
}

// publish sends the queued ends, several at once when they pile up.
func (b *Bus) publish(ctx context.Context) {
	for {
		var id string
		select {
		case <-ctx.Done():
			return
		case id = <-b.out:
		}
		ids := []string{id}
	more:
		for len(ids) < 100 {
			select {
			case id = <-b.out:
				ids = append(ids, id)
			default:
				break more
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := b.rdb.Pipelined(pctx, func(p redis.Pipeliner) error {
			for _, id := range ids {
				p.Publish(pctx, b.channel, id)
			}
			return nil
		})
		cancel()
		if err != nil && ctx.Err() == nil {
			b.log.Warn("unable to publish instance ends in redis; waiters on other replicas find them at their next poll", "ends", len(ids), "err", err)
		}
	}
}
