package model

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/google/uuid"
)

// TimeIDs makes the ids of notifications and notification deliveries: UUIDv7 (RFC 9562) whose 48-bit timestamp
// is the millisecond of the time the caller passes (its clock's, so that a fake clock's rows carry fake-clock
// ids), followed by 12 bits of sub-millisecond time that a counter bumps when two ids would not increase (RFC 9562
// §6.2, method 3), and 62 random bits. The ids of one TimeIDs increase in the order it makes them, so that lists
// ordered by (created_at, id) show one batch in the order it was written; and an id's timestamp is its row's
// creation time, so that a purge deletes the rows before a cutoff as a primary-key range (TimeIDFloor), with no
// index on the creation time. The zero value is ready to use and safe for concurrent use.
type TimeIDs struct {
	mu   sync.Mutex
	last int64 // the last id's millisecond<<12 | its 12-bit sequence
}

// Next returns a new id stamped with at.
func (g *TimeIDs) Next(at time.Time) string {
	ms := at.UnixMilli()
	sub := int64(at.Nanosecond()%int(time.Millisecond)) >> 8 // 0..3906: fits 12 bits
	now := ms<<12 | sub
	g.mu.Lock()
	if now <= g.last {
		now = g.last + 1 // never backwards, even when the clock is (a later id is never purged earlier)
	}
	g.last = now
	g.mu.Unlock()
	var b [16]byte
	if _, err := rand.Read(b[8:]); err != nil {
		panic("model: crypto/rand failed: " + err.Error()) // as crypto/rand documents: it does not fail on Linux
	}
	// The 48-bit millisecond, version 7 and the 12-bit sequence; then the variant (10) over the random bits.
	binary.BigEndian.PutUint64(b[:8], uint64(now>>12)<<16|0x7000|uint64(now&0xfff)) //nolint:gosec // G115: now > 0 after 1970
	b[8] = 0x80 | b[8]&0x3f
	return uuid.UUID(b).String()
}

// TimeIDFloor is the smallest id that TimeIDs stamps with t's millisecond or later: every id stamped before t's
// millisecond sorts before it (as text, in the lowercase form both make).
func TimeIDFloor(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMilli())<<16)
	return uuid.UUID(b).String()
}
