package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/scheduler"
)

func TestLockerOneWins(t *testing.T) {
	ctx := context.Background()
	o := redisOptions(t)
	prefix := uniquePrefix(t)
	admin := newClient(t, o)
	key := prefix + "lock:purge"
	t.Cleanup(func() { admin.Del(ctx, key) })
	a := scheduler.NewLocker(newClient(t, o), prefix, time.Minute, 0)
	b := scheduler.NewLocker(newClient(t, o), prefix, time.Minute, 0)

	la, err := a.Lock(ctx, "purge")
	if err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	if _, err := b.Lock(ctx, "purge"); !errors.Is(err, scheduler.ErrLocked) {
		t.Fatalf("second Lock = %v, want ErrLocked", err)
	}
	if ttl := admin.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("lock TTL %s, want within (0, 1m]", ttl)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if n := admin.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("lock key still there after Unlock")
	}
	lb, err := b.Lock(ctx, "purge")
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}

	// a's old lock must not release b's: the token is checked. Simulate a's lock having expired and b's being
	// current, then a late Unlock from a.
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("stale Unlock: %v", err)
	}
	if n := admin.Exists(ctx, key).Val(); n != 1 {
		t.Fatalf("a stale Unlock released another holder's lock")
	}
	if _, err := a.Lock(ctx, "purge"); !errors.Is(err, scheduler.ErrLocked) {
		t.Fatalf("Lock while b holds it = %v, want ErrLocked", err)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatalf("Unlock b: %v", err)
	}
}

func TestLockerMinHold(t *testing.T) {
	ctx := context.Background()
	o := redisOptions(t)
	prefix := uniquePrefix(t)
	admin := newClient(t, o)
	t.Cleanup(func() { admin.Del(ctx, prefix+"lock:job") })
	a := scheduler.NewLocker(newClient(t, o), prefix, time.Minute, 30*time.Second)
	b := scheduler.NewLocker(newClient(t, o), prefix, time.Minute, 30*time.Second)
	la, err := a.Lock(ctx, "job")
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// A replica whose timer fires a moment later must not run the job again.
	if _, err := b.Lock(ctx, "job"); !errors.Is(err, scheduler.ErrLocked) {
		t.Fatalf("Lock right after a fast job = %v, want ErrLocked (min hold)", err)
	}
	if ttl := admin.PTTL(ctx, prefix+"lock:job").Val(); ttl <= 25*time.Second || ttl > 30*time.Second {
		t.Fatalf("TTL after Unlock %s, want the rest of the 30s min hold", ttl)
	}
}
