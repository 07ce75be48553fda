package redisconn_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/service/redisconn"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url      string
		single   string // Addr of a single server
		db       int
		cluster  []string // Addrs of a cluster
		user     string
		password string
		tls      bool
	}{
		{url: "redis://127.0.0.1:6379/3", single: "127.0.0.1:6379", db: 3},
		{url: "redis://:pw@h:6380", single: "h:6380", password: "pw"},
		{url: "rediss://u:pw@h:6380/0", single: "h:6380", user: "u", password: "pw", tls: true},
		{url: "redis+cluster://h1:7000,h2:7001,h3:7002", cluster: []string{"h1:7000", "h2:7001", "h3:7002"}},
		{url: "redis+cluster://u:p%40ss@h1:7000,h2:7001/0?dial_timeout=3s", cluster: []string{"h1:7000", "h2:7001"}, user: "u", password: "p@ss"},
		{url: "rediss+cluster://h1:7000", cluster: []string{"h1:7000"}, tls: true},
		{url: "redis://h1:7000?addr=h2:7001&addr=h3:7002", cluster: []string{"h1:7000", "h2:7001", "h3:7002"}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := redisconn.Parse(tc.url)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var user, password string
			var tls bool
			if tc.cluster != nil {
				if got.Cluster == nil || got.Single != nil {
					t.Fatalf("want a cluster, got %+v", got)
				}
				if !slices.Equal(got.Cluster.Addrs, tc.cluster) {
					t.Fatalf("addrs %v, want %v", got.Cluster.Addrs, tc.cluster)
				}
				user, password, tls = got.Cluster.Username, got.Cluster.Password, got.Cluster.TLSConfig != nil
			} else {
				if got.Single == nil || got.Cluster != nil {
					t.Fatalf("want one server, got %+v", got)
				}
				if got.Single.Addr != tc.single || got.Single.DB != tc.db {
					t.Fatalf("addr %s db %d, want %s db %d", got.Single.Addr, got.Single.DB, tc.single, tc.db)
				}
				user, password, tls = got.Single.Username, got.Single.Password, got.Single.TLSConfig != nil
			}
			if user != tc.user || password != tc.password || tls != tc.tls {
				t.Fatalf("user %q password %q tls %v, want %q %q %v", user, password, tls, tc.user, tc.password, tc.tls)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	for url, want := range map[string]string{
		"127.0.0.1:6379":                   "want redis://",
		"http://h:1":                       "unknown scheme",
		"redis+cluster://h1:7000,,h2:7001": "none empty",
		"redis+cluster://h1:7000/2":        "only database 0",
		"redis://h1:7000/1?addr=h2:7001":   "only database 0",
		"redis+cluster://h1:7000?nope=1":   "nope",
		"redis://h:6379/x":                 "invalid database",
	} {
		if _, err := redisconn.Parse(url); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", url, err, want)
		}
	}
}

// TestOpenCluster talks to the cluster of HALLEY_TEST_REDIS_CLUSTER (scripts/redis-cluster.sh): the client
// it opens reaches every master.
func TestOpenCluster(t *testing.T) {
	url := os.Getenv("HALLEY_TEST_REDIS_CLUSTER")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HALLEY_TEST_REDIS_CLUSTER is not set: under CI=true the cluster tests must run (scripts/redis-cluster.sh start)")
		}
		t.Skip("HALLEY_TEST_REDIS_CLUSTER is not set; skipping (CI=true would fail)")
	}
	c, err := redisconn.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("Open(%q) = %T, want a cluster client", url, c)
	}
	ctx := context.Background()
	var masters atomic.Int32
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		return m.Ping(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	if n := masters.Load(); n < 3 {
		t.Fatalf("%d masters, want 3", n)
	}
}
