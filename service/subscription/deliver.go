package subscription

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbox"
)

// Headers of a webhook request.
const (
	HeaderEvent     = "X-Halley-Event"
	HeaderDelivery  = "X-Halley-Delivery"
	HeaderSignature = "X-Halley-Signature"
)

// PluginNotWired is the error recorded on deliveries to plugin subscriptions when no plugin runner is wired (PluginRuns is nil).
const PluginNotWired = "plugin subscriptions are delivered by the plugin executor (not yet wired)"

// maxResponse is how much of a receiver's answer is read (and then thrown away, but for a snippet in the log).
const maxResponse = 64 << 10

// eventPayload is what the engine writes into an event outbox row.
type eventPayload struct {
	Event      string             `json:"event"`
	At         time.Time          `json:"at"`
	InstanceID string             `json:"instance_id"`
	Template   string             `json:"template"`
	Status     string             `json:"status"`
	NodeID     string             `json:"node_id"`
	Task       json.RawMessage    `json:"task"`
	Error      *model.NodeFailure `json:"error"`
}

// Body is the JSON a webhook receives.
type Body struct {
	Event    string          `json:"event"`
	At       time.Time       `json:"at"`
	Instance BodyInstance    `json:"instance"`
	NodeID   string          `json:"node_id"`
	Task     json.RawMessage `json:"task"` // the task object for task.* events, else null
}

// BodyInstance is the instance an event happened to, as it was at that moment.
type BodyInstance struct {
	ID       string `json:"id"`
	Template string `json:"template"`
	Status   string `json:"status"`
	// Error is the node error that failed the instance (instance.failed only).
	Error *model.NodeFailure `json:"error,omitempty"`
}

// OutboxHandler returns the handler of model.OutboxEvent items for the outbox dispatcher.
func (s *Service) OutboxHandler() outbox.Handler { return s.HandleEvents }

// HandleEvents turns a batch of event outbox items into one pending delivery per matching subscription, in one
// transaction. Running it again with the same items adds nothing: each delivery is keyed by its subscription and
// the outbox row.
func (s *Service) HandleEvents(ctx context.Context, items []model.OutboxItem) error {
	// The subscriptions as they are now: one small read per batch keeps a replica whose index is a few seconds
	// old from delivering to a subscription deleted elsewhere (or missing one created elsewhere). It does not
	// take mu: Create holds mu while it writes, and on SQLite that write waits for the dispatch calling us.
	all, err := s.store.AllSubscriptions(ctx)
	if err != nil {
		return err
	}
	x := newIndex(all)
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	var ds []*model.Delivery
	for _, it := range items {
		subs := x.byTenant[it.TenantID]
		if len(subs) == 0 {
			continue
		}
		var ev eventPayload
		if err := json.Unmarshal(it.Payload, &ev); err != nil {
			// A payload nobody can read must not block the outbox; it is lost loudly.
			s.log.ErrorContext(ctx, "subscription: unreadable event in the outbox; dropped", "seq", it.Seq, "err", err)
			continue
		}
		if ev.Event == "" {
			ev.Event = it.Ref
		}
		var body []byte
		key := fmt.Sprintf("%d-%d", it.Seq, it.CreatedAt.UnixMicro())
		for _, sub := range subs {
			if !sub.Matches(ev.Event, ev.Template) {
				continue
			}
			if body == nil {
				task := ev.Task
				if len(bytes.TrimSpace(task)) == 0 {
					task = json.RawMessage("null")
				}
				body, _ = json.Marshal(Body{Event: ev.Event, At: ev.At.UTC(), Instance: BodyInstance{ID: ev.InstanceID, Template: ev.Template, Status: ev.Status, Error: ev.Error},
					NodeID: ev.NodeID, Task: task})
			}
			d := &model.Delivery{ID: uuid.NewString(), TenantID: it.TenantID, SubscriptionID: sub.ID, OutboxKey: key, Event: ev.Event,
				InstanceID: ev.InstanceID, Body: body, Status: model.DeliveryPending, CreatedAt: now, NextAttemptAt: &now}
			if sub.Plugin != "" && s.opts.PluginRuns == nil {
				d.Status, d.LastError, d.FinishedAt = model.DeliverySkipped, PluginNotWired, &now
			}
			ds = append(ds, d)
		}
	}
	n, err := s.store.AddDeliveries(ctx, ds)
	if err != nil {
		return err
	}
	if n > 0 {
		s.Notify()
	}
	return nil
}

// Notify wakes the delivery loop: new deliveries are due. HandleEvents calls it, but when it runs inside the
// outbox dispatch's transaction its rows are not visible yet; the composition root therefore also calls it after
// each dispatched batch (outbox.Options.OnDispatched).
func (s *Service) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run refreshes the index every RefreshInterval and delivers due deliveries until ctx is done. Any number of
// replicas may run it: claims are leased.
func (s *Service) Run(ctx context.Context) error {
	if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("subscription: unable to load subscriptions; will retry", "err", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.refreshLoop(ctx)
	}()
	s.deliverLoop(ctx)
	wg.Wait()
	return nil
}

func (s *Service) refreshLoop(ctx context.Context) {
	t := s.clock.NewTimer(s.opts.RefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("subscription: unable to refresh subscriptions", "err", err)
		}
		t.Reset(s.opts.RefreshInterval)
	}
}

func (s *Service) deliverLoop(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		n, err := s.DeliverOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), 30*time.Second)
			s.log.Error("subscription: unable to claim deliveries; will retry", "err", err, "retry_in", backoff)
		case n == s.opts.Concurrency:
			backoff = 0
			continue // more may be due
		default:
			backoff = 0
		}
		wait := s.opts.PollInterval
		if backoff > 0 {
			wait = backoff
		}
		t := s.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.wake:
		case <-t.C():
		}
		t.Stop()
	}
}

// DeliverOnce claims up to Concurrency due deliveries, sends them in parallel, records each outcome, and returns
// how many it claimed. The loop of Run calls it; tests call it after moving a fake clock.
func (s *Service) DeliverOnce(ctx context.Context) (int, error) {
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	ds, err := s.store.ClaimDeliveries(ctx, s.opts.Concurrency, now, now.Add(s.opts.Lease))
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.deliver(ctx, d)
		}()
	}
	wg.Wait()
	return len(ds), nil
}

// deliver makes one attempt and records it.
func (s *Service) deliver(ctx context.Context, d *model.Delivery) {
	lg := s.log.With("delivery_id", d.ID, "subscription_id", d.SubscriptionID, "event", d.Event, "instance_id", d.InstanceID, "attempt", d.Attempts)
	res := model.DeliveryResult{ID: d.ID, Attempt: d.Attempts}
	func() {
		defer func() {
			if r := recover(); r != nil {
				res.StatusCode, res.Error = 0, fmt.Sprintf("internal error: %v", r)
			}
		}()
		switch {
		case d.Target == nil:
			res.Error = "the subscription was deleted"
			res.Status = model.DeliveryFailed
		case d.Target.Plugin != "" && s.opts.PluginRuns == nil:
			res.Error = PluginNotWired
			res.Status = model.DeliverySkipped
		case d.Target.Plugin != "":
			// Handed to the plugin executor: the delivery is done once the run is queued; the run's own log
			// (GET /plugins/{name}/runs) says how it went.
			if _, err := s.opts.PluginRuns.QueueEventPlugin(ctx, d.TenantID, d.Target.Plugin, d.InstanceID, d.Body); err != nil {
				res.Error = "unable to queue the plugin run: " + err.Error()
			} else {
				res.StatusCode = 200
			}
		default:
			res.StatusCode, res.Error = s.post(ctx, d)
		}
	}()
	if ctx.Err() != nil {
		// Shutting down: the attempt was cut short, not failed. The lease runs out and a replica tries again.
		return
	}
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	switch {
	case res.Status != "":
		res.FinishedAt = &now
	case res.Error == "" && res.StatusCode >= 200 && res.StatusCode < 300:
		res.Status, res.FinishedAt = model.DeliveryDelivered, &now
	case d.Attempts >= s.opts.MaxAttempts:
		res.Status, res.FinishedAt = model.DeliveryFailed, &now
	default:
		res.Status, res.NextAttemptAt = model.DeliveryPending, now.Add(s.backoff(d.Attempts))
	}
	ok, err := s.store.FinishDelivery(ctx, res)
	if err == nil && s.opts.OnAttempt != nil {
		s.opts.OnAttempt(res)
	}
	switch {
	case err != nil:
		lg.Error("subscription: unable to record a delivery attempt; it will be retried after its lease", "err", err)
	case !ok:
		lg.Warn("subscription: delivery moved on while it was being sent (lease expired or subscription deleted); result dropped", "status", res.Status)
	case res.Status == model.DeliveryDelivered:
		lg.Debug("webhook delivered", "status_code", res.StatusCode)
	case res.Status == model.DeliveryPending:
		lg.Warn("webhook delivery failed; will retry", "status_code", res.StatusCode, "error", res.Error, "next_attempt_at", res.NextAttemptAt)
	default:
		lg.Error("webhook delivery given up", "status", res.Status, "status_code", res.StatusCode, "error", res.Error)
	}
}

// backoff is the wait after failed attempt n (1-based): the schedule's entry plus up to 25% jitter, never less.
func (s *Service) backoff(n int) time.Duration {
	b := s.opts.Backoff[min(max(n, 1), len(s.opts.Backoff))-1]
	return b + time.Duration(float64(b)*0.25*s.opts.Jitter())
}

// post sends the delivery's body to its webhook and returns the status code (0 without an answer) and an error
// message for the log ("" on 2xx). Messages never contain the secret, and name the host rather than the URL,
// whose path or query may be a credential of its own.
func (s *Service) post(ctx context.Context, d *model.Delivery) (int, string) {
	if err := ValidWebhookURL(d.Target.WebhookURL); err != nil {
		return 0, err.(*model.Error).Message
	}
	secret, err := s.open(d.Target.ID, d.Target.Secret)
	if err != nil {
		return 0, "unable to sign: " + err.Error()
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.Target.WebhookURL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, "unable to build the request: " + redact(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.opts.UserAgent)
	req.Header.Set(HeaderEvent, d.Event)
	req.Header.Set(HeaderDelivery, d.ID)
	if secret != "" {
		req.Header.Set(HeaderSignature, Sign([]byte(secret), d.Body))
	}
	resp, err := s.client.Do(req)
	if resp != nil {
		defer resp.Body.Close()
	}
	if err != nil {
		code := 0
		if resp != nil {
			code = resp.StatusCode // a refused redirect
		}
		if rctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return code, fmt.Sprintf("POST %s: no answer within %s", hostOf(d.Target.WebhookURL), s.opts.Timeout)
		}
		return code, redact(err)
	}
	snippet, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, ""
	}
	msg := "HTTP " + strconv.Itoa(resp.StatusCode)
	if t := printable(snippet, 256); t != "" {
		msg += ": " + t
	} else if err != nil {
		msg += " (reading the answer: " + redact(err) + ")"
	}
	return resp.StatusCode, msg
}

// Sign returns the X-Halley-Signature value of body: "sha256=" and the hex HMAC-SHA256 of body with secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// checkRedirect follows at most 3 redirects, to http or https URLs with a host only, and never from https to
// http (the body and its signature would travel in clear text).
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("stopped after 3 redirects")
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing a redirect to a %q URL", req.URL.Scheme)
	}
	if req.URL.Hostname() == "" {
		return errors.New("refusing a redirect to a URL without a host")
	}
	if via[0].URL.Scheme == "https" && req.URL.Scheme == "http" {
		return errors.New("refusing a redirect from https to http")
	}
	return nil
}

// redact describes a client error naming the host only.
func redact(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s %s: %v", ue.Op, hostOf(ue.URL), ue.Err)
	}
	return err.Error()
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(no host)"
	}
	return u.Scheme + "://" + u.Host
}

// printable returns at most n bytes of b as one line of printable text.
func printable(b []byte, n int) string {
	s := strings.ToValidUTF8(string(b), "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
