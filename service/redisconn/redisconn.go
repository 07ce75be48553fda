// Package redisconn opens the Redis that HALLEY_REDIS_URL names: one server, or a Redis Cluster. Every user of
// Redis in Halley (the scheduler, the job locks, pub/sub wake-ups, login throttling) takes the
// redis.UniversalClient it returns, so the same code runs on both.
package redisconn

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Target is a parsed HALLEY_REDIS_URL: exactly one of Single and Cluster is set.
type Target struct {
	Single  *redis.Options
	Cluster *redis.ClusterOptions
}

// Parse reads a Redis URL in one of these forms:
//
//	redis://[user:password@]host:6379/0      one server (rediss:// for TLS), as redis.ParseURL reads it
//	redis+cluster://[user:password@]h1:7000,h2:7001,h3:7002[?options]   a Redis Cluster (rediss+cluster:// for TLS)
//	redis://[user:password@]h1:7000?addr=h2:7001&addr=h3:7002           the same, as redis.ParseClusterURL reads it
//
// A cluster has only database 0, so a cluster URL's path may only be empty, "/" or "/0". The options of a
// cluster URL are those of redis.ParseClusterURL (dial_timeout, read_timeout, max_redirects...).
func Parse(raw string) (Target, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return Target{}, fmt.Errorf("redis URL: want redis://host:port/db or redis+cluster://host:port,host:port,... (got %q)", raw)
	}
	switch scheme {
	case "redis+cluster", "rediss+cluster":
		o, err := parseCluster(strings.TrimSuffix(scheme, "+cluster"), rest)
		if err != nil {
			return Target{}, err
		}
		return Target{Cluster: o}, nil
	case "redis", "rediss":
		u, err := url.Parse(raw)
		if err != nil {
			return Target{}, fmt.Errorf("redis URL: %w", err)
		}
		if u.Query().Has("addr") { // go-redis's own cluster form
			o, err := clusterOptions(u)
			if err != nil {
				return Target{}, err
			}
			return Target{Cluster: o}, nil
		}
		o, err := redis.ParseURL(raw)
		if err != nil {
			return Target{}, fmt.Errorf("redis URL: %w", err)
		}
		return Target{Single: o}, nil
	default:
		return Target{}, fmt.Errorf("redis URL: unknown scheme %q: want redis, rediss, redis+cluster or rediss+cluster", scheme)
	}
}

// parseCluster turns "user:pass@h1:7000,h2:7001/0?x=y" of a redis+cluster URL into go-redis's form,
// redis://user:pass@h1:7000/0?x=y&addr=h2:7001.
func parseCluster(scheme, rest string) (*redis.ClusterOptions, error) {
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hosts := "", authority
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		userinfo, hosts = authority[:i+1], authority[i+1:]
	}
	addrs := strings.Split(hosts, ",")
	for _, a := range addrs {
		if a == "" {
			return nil, errors.New("redis URL: a cluster URL lists its nodes as host:port,host:port,... with none empty")
		}
	}
	u, err := url.Parse(scheme + "://" + userinfo + addrs[0] + tail)
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	q := u.Query()
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	u.RawQuery = q.Encode()
	return clusterOptions(u)
}

func clusterOptions(u *url.URL) (*redis.ClusterOptions, error) {
	if p := strings.TrimPrefix(u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("redis URL: a Redis Cluster has only database 0, the URL names database %q", p)
	}
	u.Path = ""
	o, err := redis.ParseClusterURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("redis URL: %w", err)
	}
	return o, nil
}

// Client returns a new client for the target: a *redis.ClusterClient for a cluster, else a *redis.Client.
func (t Target) Client() redis.UniversalClient {
	if t.Cluster != nil {
		return redis.NewClusterClient(t.Cluster)
	}
	return redis.NewClient(t.Single)
}

// Open parses raw and returns a client for it; it does not connect yet.
func Open(raw string) (redis.UniversalClient, error) {
	t, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	return t.Client(), nil
}
