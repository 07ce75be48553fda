package template

import (
	"sync"
	"time"
)

// LatestTTL is how long a template's latest version, once read, is started without reading it again. A start that
// names no version (most do) read it with a database round trip of its own: 6 % of Halley's CPU in the steps
// suite at 100 clients (docs/benchmarks.md). A version published through this process is started from at once; one
// published through another replica, within LatestTTL — as if those starts had come a moment earlier. Versions
// never change once published, so nothing else can be stale.
const LatestTTL = time.Second

// latestMax bounds the entries kept (a tenant's templates; hidden one-off templates are started by version).
const latestMax = 10000

type latestKey struct{ tenant, key string }

type latestEntry struct {
	version int
	at      time.Time
}

// latestVersions caches the latest version of each template started from, for LatestTTL.
type latestVersions struct {
	mu sync.Mutex
	m  map[latestKey]latestEntry
}

func (l *latestVersions) get(tenant, key string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.m[latestKey{tenant, key}]
	if !ok || now.Sub(e.at) >= LatestTTL || now.Before(e.at) {
		return 0, false
	}
	return e.version, true
}

// put keeps version as the latest of the template, read at at; an older version never replaces a newer one (a
// read that began before this process published lands after it).
func (l *latestVersions) put(tenant, key string, version int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= latestMax {
		l.m = map[latestKey]latestEntry{}
	}
	k := latestKey{tenant, key}
	if e, ok := l.m[k]; ok && e.version > version && at.Sub(e.at) < LatestTTL {
		return
	}
	l.m[k] = latestEntry{version: version, at: at}
}
