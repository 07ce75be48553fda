package notify

import (
	"context"
	"sync"
	"time"

	"github.com/halley-bpm/halley/model"
)

// In-step notifications (engine.InStepSink). An event notify wants is rendered in the step that raised it and its
// notification and deliveries are written in the step's own transaction: no outbox row, no dispatch, no second
// transaction, no second decode. The step runs under its instance's row lock, where nothing may read the
// database, so what rendering needs — the tenant's settings and channels, the recipients', initiators' and
// actors' users — comes from a cache (see cache). When the cache lacks one of them the event is not taken: it goes
// to the outbox and HandleEvents writes the same rows (the same keys: model.StepEvent.Key), and the cache loads
// what was missing for the next event.

// DefaultCacheTTL is how long a cached user or tenant view is used. A change made through this process (PUT /me,
// the users admin, the notification settings and channels) takes effect at once; one made on another replica is
// seen within this time.
const DefaultCacheTTL = 2 * time.Second

// Take implements engine.InStepSink: it adds the event's in-app notifications and deliveries to w when the cache
// holds everything they are rendered from.
func (s *Service) Take(w *model.Work, ev *model.StepEvent) bool {
	if s.cache == nil {
		return false
	}
	p := eventPayload{Event: ev.Name, Key: ev.Key, At: ev.At, InstanceID: ev.InstanceID, Template: ev.Template, Title: ev.Title,
		Initiator: ev.Initiator, NodeName: ev.NodeName, Task: ev.Task, Users: ev.Users, Actor: ev.Actor, Comment: ev.Comment,
		TitleI18n: ev.TitleI18n, NodeI18n: ev.NodeI18n, TemplateName: ev.TemplateName, TemplateI18n: ev.TemplateI18n}
	notices := s.noticesOf(ev.Key, ev.TenantID, ev.Name, &p)
	if len(notices) == 0 {
		return true // nobody to tell
	}
	var names []string
	for _, n := range notices {
		names = append(names, n.username, n.initiator, n.actor)
	}
	v, users, ok := s.cache.get(ev.TenantID, names)
	if !ok {
		return false
	}
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	ctx := context.Background()
	for _, n := range notices {
		u := users[n.username]
		if u == nil || u.Disabled {
			continue
		}
		in, out := s.render(ctx, v, u, users, n, now)
		w.Notifications = append(w.Notifications, in)
		w.NotificationDeliveries = append(w.NotificationDeliveries, out...)
	}
	return true
}

// Preload reads a tenant's settings and channels and the named users into the cache now; otherwise they are read
// after the first event that needs them (which the outbox carries).
func (s *Service) Preload(ctx context.Context, tenant string, usernames ...string) error {
	if s.cache == nil {
		return nil
	}
	at := s.clock.Now()
	v, users, err := s.load(ctx, tenant, usernames, true)
	if err != nil {
		return err
	}
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tenants[tenant] = &viewEntry{v: v, at: at}
	for _, n := range usernames {
		c.users[[2]string{tenant, n}] = &userEntry{u: users[n], at: at}
	}
	return nil
}

// Committed implements engine.InStepSink: a committed step wrote deliveries, the delivery loop has work.
func (s *Service) Committed(w *model.Work) {
	if len(w.NotificationDeliveries) > 0 {
		s.Notify()
	}
}

// UserChanged drops a user from the cache (the store calls it after a user was created, changed or deleted).
func (s *Service) UserChanged(tenant, username string) {
	if s.cache != nil {
		s.cache.forgetUser(tenant, username)
	}
}

// settingsChanged drops a tenant's settings and channels from the cache.
func (s *Service) settingsChanged(tenant string) {
	if s.cache != nil {
		s.cache.forgetTenant(tenant)
	}
}

// cache holds what rendering reads, each entry for ttl after it was read; an entry older than half of that is
// read again in the background while it is still used, so that a steady flow of events keeps finding it. get
// never reads the database: what it lacks is loaded by a goroutine (one per tenant at a time) and the caller
// goes without. Entries unused for two ttls are dropped when the next load runs.
type cache struct {
	ttl  time.Duration
	now  func() time.Time
	load func(ctx context.Context, tenant string, users []string, view bool) (*tenantView, map[string]*model.User, error)
	log  func(msg string, args ...any)

	mu      sync.Mutex
	tenants map[string]*viewEntry
	users   map[[2]string]*userEntry
	wanted  map[string]map[string]bool // by tenant: the users to load
	loading map[string]bool            // tenants with a load running
	swept   time.Time
	// gen counts the entries forgotten: a load that began before one was forgotten stores nothing (it may have
	// read the row before the change).
	gen uint64
}

type viewEntry struct {
	v      *tenantView
	at     time.Time
	wanted bool // a refresh is asked for
}

type userEntry struct {
	u  *model.User // nil: no such user
	at time.Time
}

func newCache(ttl time.Duration, now func() time.Time, load func(ctx context.Context, tenant string, users []string, view bool) (*tenantView, map[string]*model.User, error),
	log func(msg string, args ...any)) *cache {
	return &cache{ttl: ttl, now: now, load: load, log: log, tenants: map[string]*viewEntry{}, users: map[[2]string]*userEntry{},
		wanted: map[string]map[string]bool{}, loading: map[string]bool{}}
}

// get returns the tenant's view and the named users ("" is left out) when the cache holds all of them, fresh.
func (c *cache) get(tenant string, names []string) (*tenantView, map[string]*model.User, bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := true
	var v *tenantView
	switch e := c.tenants[tenant]; {
	case e == nil || now.Sub(e.at) >= c.ttl:
		ok = false
		c.tenants[tenant] = &viewEntry{wanted: true}
		if e != nil {
			c.tenants[tenant].at = e.at // keep the age: the entry stays stale until loaded
		}
	default:
		v = e.v
		if now.Sub(e.at) >= c.ttl/2 {
			e.wanted = true
		}
	}
	users := make(map[string]*model.User, len(names))
	for _, name := range names {
		if name == "" {
			continue
		}
		e := c.users[[2]string{tenant, name}]
		if e == nil || now.Sub(e.at) >= c.ttl {
			ok = false
			c.want(tenant, name)
			continue
		}
		if now.Sub(e.at) >= c.ttl/2 {
			c.want(tenant, name)
		}
		users[name] = e.u
	}
	if len(c.wanted[tenant]) > 0 || c.tenants[tenant].wanted {
		c.startLoad(tenant)
	}
	if !ok {
		return nil, nil, false
	}
	return v, users, true
}

func (c *cache) want(tenant, name string) {
	w := c.wanted[tenant]
	if w == nil {
		w = map[string]bool{}
		c.wanted[tenant] = w
	}
	w[name] = true
}

// startLoad starts the tenant's load unless one runs (it then loads what was asked for meanwhile next). mu held.
func (c *cache) startLoad(tenant string) {
	if c.loading[tenant] {
		return
	}
	c.loading[tenant] = true
	go c.fill(tenant)
}

// fill loads what the tenant's entries want until nothing more is wanted.
func (c *cache) fill(tenant string) {
	for {
		c.mu.Lock()
		var names []string
		for n := range c.wanted[tenant] {
			names = append(names, n)
		}
		delete(c.wanted, tenant)
		e := c.tenants[tenant]
		view := e == nil || e.wanted
		if e != nil {
			e.wanted = false
		}
		if len(names) == 0 && !view {
			delete(c.loading, tenant)
			c.sweep()
			c.mu.Unlock()
			return
		}
		gen := c.gen
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		at := c.now()
		v, users, err := c.load(ctx, tenant, names, view)
		cancel()
		c.mu.Lock()
		if err != nil {
			// Events keep going through the outbox; the next one that misses asks again.
			delete(c.loading, tenant)
			c.mu.Unlock()
			c.log("notify: unable to load users and settings for in-step notifications; the outbox carries them meanwhile", "tenant", tenant, "err", err)
			return
		}
		if gen != c.gen {
			c.mu.Unlock()
			continue // what it read may predate a change: the next miss asks again
		}
		if view {
			e := c.tenants[tenant]
			c.tenants[tenant] = &viewEntry{v: v, at: at, wanted: e != nil && e.wanted}
		}
		for _, n := range names {
			c.users[[2]string{tenant, n}] = &userEntry{u: users[n], at: at}
		}
		c.mu.Unlock()
	}
}

// sweep drops entries unused for two ttls, at most once a ttl. mu held.
func (c *cache) sweep() {
	now := c.now()
	if now.Sub(c.swept) < c.ttl {
		return
	}
	c.swept = now
	for k, e := range c.users {
		if now.Sub(e.at) >= 2*c.ttl {
			delete(c.users, k)
		}
	}
	for k, e := range c.tenants {
		if !e.at.IsZero() && now.Sub(e.at) >= 2*c.ttl && !c.loading[k] {
			delete(c.tenants, k)
		}
	}
}

func (c *cache) forgetUser(tenant, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.users, [2]string{tenant, name})
	c.gen++
}

func (c *cache) forgetTenant(tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.tenants, tenant)
	c.gen++
}
