package template_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// countingStore counts the reads of a template's latest version.
type countingStore struct {
	*store.Store
	reads atomic.Int64
}

func (c *countingStore) LatestVersion(ctx context.Context, tenant, key string) (int, error) {
	c.reads.Add(1)
	return c.Store.LatestVersion(ctx, tenant, key)
}

// TestLatestVersionCached: a start that names no version reads the latest version once per template.LatestTTL; a
// version published through this service is started from at once, one published through another replica once
// the TTL has passed; a template not published yet, or unknown, is read every time (publishing it is seen at
// once); and many starts racing a publish never go back to an older version than one they saw.
func TestLatestVersionCached(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
		cs := &countingStore{Store: s}
		here := template.New(cs, template.Options{Clock: clk})
		there := template.New(s, template.Options{Clock: clk}) // another replica
		admin := &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{model.RoleAdmin}}
		def := func(name string) json.RawMessage {
			return json.RawMessage(`{"nodes":[{"id":"start","type":"start","name":"` + name + `","trigger":{"kind":"manual"}},{"id":"end","type":"end"}],"edges":[{"from":"start","to":"end"}]}`)
		}
		latest := func(want int) {
			t.Helper()
			c, err := here.Compiled(ctx, model.DefaultTenant, "leave", 0)
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != want {
				t.Fatalf("the latest version: %d, want %d", c.Version, want)
			}
		}
		if _, err := here.Compiled(ctx, model.DefaultTenant, "leave", 0); model.ErrorKind(err) != model.ENOTFOUND {
			t.Fatalf("an unknown template: %v", err)
		}
		if _, err := here.Create(ctx, admin, template.CreateRequest{Key: "leave", Name: "Leave", Definition: def("v1")}); err != nil {
			t.Fatal(err)
		}
		if _, err := here.Compiled(ctx, model.DefaultTenant, "leave", 0); model.ErrorKind(err) != model.EUNPROCESSABLE {
			t.Fatalf("a template not published yet: %v", err)
		}
		// Published through the other replica, right after this one read it unpublished: seen at once.
		if _, err := there.Publish(ctx, admin, "leave"); err != nil {
			t.Fatal(err)
		}
		latest(1)
		before := cs.reads.Load()
		for range 100 {
			latest(1)
		}
		if n := cs.reads.Load() - before; n != 0 {
			t.Fatalf("100 starts within the TTL read the latest version %d times, want 0", n)
		}

		// Published here: started from at once.
		if _, err := here.SaveDraft(ctx, admin, "leave", def("v2")); err != nil {
			t.Fatal(err)
		}
		if _, err := here.Publish(ctx, admin, "leave"); err != nil {
			t.Fatal(err)
		}
		latest(2)

		// Published through the other replica: version 2 until the TTL has passed since it was read.
		if _, err := there.SaveDraft(ctx, admin, "leave", def("v3")); err != nil {
			t.Fatal(err)
		}
		if _, err := there.Publish(ctx, admin, "leave"); err != nil {
			t.Fatal(err)
		}
		latest(2)
		clk.Advance(template.LatestTTL - time.Millisecond)
		latest(2)
		clk.Advance(time.Millisecond)
		latest(3)
		if n := cs.reads.Load() - before; n != 1 {
			t.Fatalf("%d reads of the latest version, want 1 (after the TTL)", n)
		}

		// Starts racing publishes through this replica: each sees a version at least as new as the last one
		// published before it began.
		var published atomic.Int64
		published.Store(3)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for range 8 {
			wg.Go(func() {
				for range 200 {
					floor := published.Load()
					c, err := here.Compiled(ctx, model.DefaultTenant, "leave", 0)
					if err != nil {
						errs <- err
						return
					}
					if int64(c.Version) < floor {
						errs <- errors.New("a start went back to an older version than one published before it")
						return
					}
				}
			})
		}
		for v := 4; v <= 8; v++ {
			if _, err := here.SaveDraft(ctx, admin, "leave", def("v"+strconv.Itoa(v))); err != nil {
				t.Fatal(err)
			}
			pv, err := here.Publish(ctx, admin, "leave")
			if err != nil {
				t.Fatal(err)
			}
			published.Store(int64(pv.Version))
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		latest(8)
	})
}
