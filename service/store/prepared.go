package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// Prepared steps (model.StepPreparer): a step run on its instance's cached rows (the step cache, stepcache.go) as
// it arrives, on the request's goroutine, and written later with the steps of its group. The engine's group leader
// then only writes: the steps of the next group run while the group before it is at the database (service/engine
// group.go). The write is the checked one of a step on cached rows, so an instance changed meanwhile fails it.

var _ model.StepPreparer = (*Store)(nil)

// PrepareStep implements model.StepPreparer.
func (s *Store) PrepareStep(tenant, id string, fn func(w *model.Work) error) (*model.PreparedStep, bool) {
	if s.cache == nil {
		return nil, false
	}
	cw, ok := s.cache.lru.Get(cacheKey(tenant, id))
	if !ok {
		return nil, false
	}
	ws, err := cachedWorks([]*cachedWork{cw})
	if err != nil {
		return nil, false
	}
	if err := fn(ws[0]); err != nil {
		return nil, false // decided again on the rows under the lock
	}
	return &model.PreparedStep{Work: ws[0], Rev: cw.inst.Rev}, true
}

// CommitPrepared implements model.StepPreparer.
func (s *Store) CommitPrepared(ctx context.Context, tenant string, steps []*model.PreparedStep, creates ...*model.Work) error {
	if len(steps) == 0 && len(creates) == 0 {
		return nil
	}
	if s.cache == nil || txFrom(ctx) != nil {
		return errors.New("store: prepared steps are written only with a step cache, in a transaction of their own")
	}
	for _, w := range creates {
		if w.Instance.TenantID != tenant {
			return fmt.Errorf("store: instance %s to create is of tenant %q, not %q", w.Instance.ID, w.Instance.TenantID, tenant)
		}
	}
	ws := make([]*model.Work, 0, len(steps))
	ids := make([]string, 0, len(steps))
	revs := make(map[string]int64, len(steps))
	for _, p := range steps {
		i := p.Work.Instance
		if i.TenantID != tenant {
			return fmt.Errorf("store: prepared step of instance %s is of tenant %q, not %q", i.ID, i.TenantID, tenant)
		}
		if _, dup := revs[i.ID]; dup {
			return fmt.Errorf("store: two prepared steps of instance %s in one transaction", i.ID)
		}
		revs[i.ID] = p.Rev
		ws = append(ws, p.Work)
		ids = append(ids, i.ID)
	}
	// In id order, as a lock read locks them.
	slices.SortFunc(ws, func(a, b *model.Work) int { return strings.Compare(a.Instance.ID, b.Instance.ID) })
	written := make(map[string]instanceRow, len(ws)+len(creates))
	s.cache.hits.Add(1)
	err := s.hotTxOnce(ctx, func(tx *gorm.DB) error {
		clear(written)
		return s.saveWorks(tx, creates, revs, written, ws...)
	})
	if err != nil {
		s.cache.evict(tenant, ids)
		if errors.Is(err, errStaleCache) {
			s.cache.stale.Add(1)
			return fmt.Errorf("store: %w", model.ErrStalePrepared)
		}
		return err
	}
	s.cache.keep(written, append(creates[:len(creates):len(creates)], ws...))
	return nil
}
