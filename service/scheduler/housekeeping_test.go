package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/service/scheduler"
)

// startHousekeeper runs job every 50 ms under the name "purge-test" until the test ends.
func startHousekeeper(t *testing.T, rdb redis.UniversalClient, prefix string, job func(ctx context.Context) error) {
	t.Helper()
	if _, err := scheduler.NewHousekeeper(rdb, prefix, scheduler.HousekeeperOptions{}, scheduler.Job{Every: time.Second}); err == nil {
		t.Fatalf("NewHousekeeper accepted a job without a name or a function")
	}
	if rdb != nil {
		if _, err := scheduler.NewHousekeeper(rdb, "", scheduler.HousekeeperOptions{}, scheduler.Job{Name: "purge-test", Every: time.Second, Run: job}); err == nil {
			t.Fatalf("NewHousekeeper accepted Redis locks without a key prefix")
		}
	}
	hk, err := scheduler.NewHousekeeper(rdb, prefix, scheduler.HousekeeperOptions{}, scheduler.Job{Name: "purge-test", Every: 50 * time.Millisecond, Run: job})
	if err != nil {
		t.Fatalf("NewHousekeeper: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- hk.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run after its context ended: %v", err)
		}
	})
}

// waitRuns receives n values from ran, failing after 5 s (gocron runs on the wall clock).
func waitRuns[T any](t *testing.T, ran <-chan T, n int) []T {
	t.Helper()
	var got []T
	timeout := time.After(5 * time.Second)
	for len(got) < n {
		select {
		case v := <-ran:
			got = append(got, v)
		case <-timeout:
			t.Fatalf("housekeeping job ran %d of %d times within 5s", len(got), n)
		}
	}
	return got
}

func TestHousekeeperRunsJob(t *testing.T) {
	ran := make(chan struct{}, 100)
	startHousekeeper(t, nil, "", func(ctx context.Context) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return errors.New("purge failed") // logged; the job keeps its schedule
	})
	waitRuns(t, ran, 2)
}

func TestHousekeeperWithRedisLocker(t *testing.T) {
	ctx := context.Background()
	o := redisOptions(t)
	prefix := uniquePrefix(t)
	c := newClient(t, o)
	key := prefix + "lock:purge-test"
	t.Cleanup(func() { c.Del(ctx, key) })
	// The job reports whether it runs under the job's lock (the key exists while it runs).
	locked := make(chan bool, 100)
	startHousekeeper(t, c, prefix, func(ctx context.Context) error {
		select {
		case locked <- c.Exists(ctx, key).Val() == 1:
		default:
		}
		return nil
	})
	for _, l := range waitRuns(t, locked, 2) {
		if !l {
			t.Fatalf("housekeeping job ran without holding its Redis lock")
		}
	}
}
