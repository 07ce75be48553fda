package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/halley-bpm/halley/model"
)

// Run delivers due deliveries until ctx is done. Any number of replicas may run it: claims are leased, and each
// channel's rate is kept in its row.
func (s *Service) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		wait, err := s.DeliverOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			backoff = min(max(2*backoff, 100*time.Millisecond), 30*time.Second)
			s.log.Error("notify: unable to claim deliveries; will retry", "err", err, "retry_in", backoff)
			wait = backoff
		} else {
			backoff = 0
		}
		if wait == 0 {
			continue // a channel had more due than one claim takes
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-s.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// DeliverOnce sends what is due now on every channel, each channel one claim (at most Batch deliveries, within
// its rate), channels in parallel and each channel's deliveries one after another. It returns how long the
// loop may wait before calling again: 0 when a channel has more due, else until the poll interval or the
// earliest time a rate-limited channel frees a slot.
func (s *Service) DeliverOnce(ctx context.Context) (time.Duration, error) {
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	due, err := s.store.DueChannels(ctx, now)
	if err != nil {
		return 0, err
	}
	wait := s.opts.PollInterval
	var mu sync.Mutex
	var wg sync.WaitGroup
	var first error
	for _, key := range due {
		s.mu.Lock()
		until, blocked := s.blocked[key]
		s.mu.Unlock()
		if blocked && now.Before(until) {
			wait = min(wait, until.Sub(now))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			more, next, err := s.deliverChannel(ctx, key, now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && first == nil:
				first = err
			case more:
				wait = 0
			case !next.IsZero():
				wait = min(wait, max(next.Sub(now), time.Millisecond))
			}
		}()
	}
	wg.Wait()
	return wait, first
}

// deliverChannel claims and sends one batch of a channel. more says a full batch was sent (more may be due);
// next is when the channel's rate frees its next slot, when the rate is what stopped it.
func (s *Service) deliverChannel(ctx context.Context, key [2]string, now time.Time) (more bool, next time.Time, err error) {
	tenant, name := key[0], key[1]
	ch, err := s.store.GetChannel(ctx, tenant, name)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			// Deleted: DeleteChannel failed its deliveries, and these were written after it by a step that rendered
			// from settings read before (the in-step cache); they fail the same way.
			if n, err := s.store.FailChannelDeliveries(ctx, tenant, name); err != nil {
				return false, time.Time{}, err
			} else if n > 0 {
				s.log.Warn("notify: deliveries to a deleted channel failed", "tenant", tenant, "channel", name, "count", n)
			}
			return false, time.Time{}, nil
		}
		return false, time.Time{}, err
	}
	cfg, snd, openErr := s.channelOf(ch)
	rate := 0
	if cfg != nil {
		rate = cfg.rate(ch.Kind)
	}
	claim, err := s.store.ClaimChannelDeliveries(ctx, tenant, name, s.opts.Batch, rate, now, now.Add(s.opts.Lease))
	if err != nil {
		return false, time.Time{}, err
	}
	s.mu.Lock()
	if claim.NextFree.After(now) && len(claim.Deliveries) < s.opts.Batch {
		s.blocked[key] = claim.NextFree
	} else {
		delete(s.blocked, key)
	}
	s.mu.Unlock()
	for _, d := range claim.Deliveries {
		if ctx.Err() != nil {
			return false, time.Time{}, nil // shutting down: the leases run out and a replica sends them
		}
		var sendErr error
		if openErr != nil {
			sendErr = fmt.Errorf("the channel cannot be used: %w", openErr)
		} else {
			sendErr = s.send(ctx, snd, d)
		}
		if ctx.Err() != nil {
			return false, time.Time{}, nil
		}
		s.finish(ctx, d, sendErr)
	}
	if len(claim.Deliveries) < s.opts.Batch && claim.NextFree.After(now) {
		return false, claim.NextFree, nil
	}
	return len(claim.Deliveries) == s.opts.Batch, time.Time{}, nil
}

// send makes one attempt, turning a panic into an error.
func (s *Service) send(ctx context.Context, snd Sender, d *model.NotificationDelivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	var m Message
	if err := json.Unmarshal(d.Message, &m); err != nil {
		return fmt.Errorf("the stored message is unreadable: %w", err)
	}
	return snd.Send(ctx, &m)
}

// finish records an attempt: delivered, pending again after a back-off, or failed after the last attempt.
func (s *Service) finish(ctx context.Context, d *model.NotificationDelivery, sendErr error) {
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	res := model.DeliveryResult{ID: d.ID, Attempt: d.Attempts}
	switch {
	case sendErr == nil:
		res.Status, res.FinishedAt = model.DeliveryDelivered, &now
	case d.Attempts >= s.opts.MaxAttempts:
		res.Status, res.Error, res.FinishedAt = model.DeliveryFailed, errorText(sendErr), &now
	default:
		res.Status, res.Error, res.NextAttemptAt = model.DeliveryPending, errorText(sendErr), now.Add(s.backoff(d.Attempts)).Truncate(time.Microsecond)
	}
	lg := s.log.With("delivery_id", d.ID, "channel", d.Channel, "kind", d.Kind, "event", d.Event, "recipient", d.Recipient, "attempt", d.Attempts)
	ok, err := s.store.FinishNotificationDelivery(ctx, res)
	switch {
	case err != nil:
		lg.Error("notify: unable to record a delivery attempt; it is tried again after its lease", "err", err)
		return
	case !ok:
		lg.Warn("notify: the delivery moved on while it was being sent (lease expired or channel deleted); result dropped", "status", res.Status)
		return
	case res.Status == model.DeliveryDelivered:
		lg.Debug("notification delivered")
	case res.Status == model.DeliveryPending:
		lg.Warn("notification delivery failed; will retry", "error", res.Error, "next_attempt_at", res.NextAttemptAt)
	default:
		lg.Error("notification delivery given up", "error", res.Error)
		if s.failures != nil {
			s.failures.DeliveryFailed(d.Kind)
		}
	}
	if s.opts.OnAttempt != nil {
		s.opts.OnAttempt(d, res)
	}
}

// backoff is the wait after failed attempt n (1-based): the schedule's entry plus up to 25% jitter.
func (s *Service) backoff(n int) time.Duration {
	b := s.opts.Backoff[min(max(n, 1), len(s.opts.Backoff))-1]
	return b + time.Duration(float64(b)*0.25*s.opts.Jitter())
}

// Digest writes the daily digest ("you have 7 pending approvals") of every tenant whose digest_hour is the
// current hour in its time zone, to every user with pending approvals: in the app and through the channels of
// the tenant's "digest" setting. A housekeeping job calls it several times an hour on any replica: each user's
// digest of a day is written once (its key is the day). It returns how many digests it wrote (0 when they were
// written already).
func (s *Service) Digest(ctx context.Context) (int, error) {
	all, err := s.store.AllNotificationSettings(ctx)
	if err != nil {
		return 0, err
	}
	now := s.clock.Now()
	total := 0
	for tenant, st := range all {
		if st.DigestHour == nil {
			continue
		}
		loc, err := time.LoadLocation(st.TimeZone)
		if err != nil {
			loc = time.UTC
		}
		local := now.In(loc)
		if local.Hour() != *st.DigestHour {
			continue
		}
		counts, err := s.store.PendingTaskCounts(ctx, tenant)
		if err != nil {
			return total, err
		}
		var ns []*notice
		day := local.Format("2006-01-02")
		for user, n := range counts {
			if n == 0 || !model.IsPersonInitiator(user) {
				continue
			}
			ns = append(ns, &notice{key: "digest:" + day, event: model.NotifyDigest, tenant: tenant, username: user, at: now.UTC(),
				data: Data{Count: n}, link: s.links.InboxPage, inApp: "/inbox"})
		}
		if len(ns) == 0 {
			continue
		}
		n, _, err := s.write(ctx, ns)
		if err != nil {
			return total, err
		}
		total += n
	}
	if total > 0 {
		s.Notify()
	}
	return total, nil
}

// Purge deletes notifications and finished deliveries created before t (a housekeeping job).
func (s *Service) Purge(ctx context.Context, before time.Time) (int64, error) {
	return s.store.PurgeNotifications(ctx, before)
}
