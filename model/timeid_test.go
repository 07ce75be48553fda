package model_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
)

// TestTimeIDs: ids are RFC 9562 version-7 UUIDs stamped with the time given (not the wall clock), increase in the
// order they are made — within one millisecond, across goroutines, and when the time given goes back — and sort
// against TimeIDFloor as their stamps do.
func TestTimeIDs(t *testing.T) {
	at := time.Date(2031, 7, 4, 12, 30, 0, 123_456_789, time.UTC)
	var g model.TimeIDs
	id := g.Next(at)
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 || u.String() != id {
		t.Fatalf("%s: not a canonical UUIDv7 (%v, version %d, variant %v)", id, err, u.Version(), u.Variant())
	}
	if sec, nsec := u.Time().UnixTime(); time.Unix(sec, nsec).UnixMilli() != at.UnixMilli() {
		t.Fatalf("%s carries %v, want the millisecond of %v", id, time.Unix(sec, nsec).UTC(), at)
	}

	// The same instant many times, and a clock that goes back: still increasing.
	prev := id
	for i := range 5000 {
		when := at
		if i%100 == 99 {
			when = at.Add(-time.Hour)
		}
		next := g.Next(when)
		if next <= prev {
			t.Fatalf("id %d %s does not sort after %s", i, next, prev)
		}
		prev = next
	}

	// Many goroutines: all distinct, and each goroutine's ids increase.
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			var mine []string
			for range 2000 {
				mine = append(mine, g.Next(at))
			}
			if !slices.IsSorted(mine) {
				t.Error("one goroutine's ids do not increase")
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range mine {
				if seen[id] {
					t.Errorf("%s made twice", id)
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()

	// The floor: ids stamped in an earlier millisecond sort before it, ids of its millisecond or later do not.
	floor := model.TimeIDFloor(at)
	fresh := func(when time.Time) string { return (&model.TimeIDs{}).Next(when) }
	if e := fresh(at.Truncate(time.Millisecond).Add(-time.Nanosecond)); e >= floor {
		t.Errorf("an id of the millisecond before, %s, does not sort before the floor %s", e, floor)
	}
	for _, when := range []time.Time{at.Truncate(time.Millisecond), at, at.Add(time.Millisecond), at.AddDate(5, 0, 0)} {
		if e := fresh(when); e < floor {
			t.Errorf("an id of %v, %s, sorts before the floor %s of %v", when, e, floor, at)
		}
	}
	if e := fresh(at.AddDate(-3, 0, 0)); e >= floor {
		t.Errorf("an id of three years before, %s, does not sort before the floor %s", e, floor)
	}
}
