package identity

import (
	"context"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
)

// TestHashingBound: bcrypt work beyond HashConcurrency waits up to HashQueueWait for a slot, then is refused
// with 503 busy (details.retry_after: 1); a slot that frees in time is taken.
func TestHashingBound(t *testing.T) {
	s := New(nil, Options{Secret: []byte("x"), BcryptCost: bcrypt.MinCost, HashConcurrency: 2, HashQueueWait: 20 * time.Millisecond})
	hash, _ := bcrypt.GenerateFromPassword([]byte("pw-123456"), bcrypt.MinCost)
	s.hashSlots <- struct{}{}
	s.hashSlots <- struct{}{} // both slots busy
	_, err := s.compare(context.Background(), hash, "pw-123456")
	if e, ok := err.(*model.Error); !ok || e.Kind != model.EUNAVAILABLE || e.Code != "busy" || e.Details["retry_after"] != 1 {
		t.Fatalf("all slots busy: %v", err)
	}
	// A slot freed while it waits is taken.
	s.hashWait = 5 * time.Second
	go func() { <-s.hashSlots }()
	ok, err := s.compare(context.Background(), hash, "pw-123456")
	if err != nil || !ok {
		t.Fatalf("a freed slot: %v %v", ok, err)
	}
	if len(s.hashSlots) != 1 {
		t.Fatalf("the slot must be given back: %d taken", len(s.hashSlots))
	}
}
