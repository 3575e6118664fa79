package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	_ "github.com/lockbench/lockbench/backends/redis"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
	goredis "github.com/redis/go-redis/v9"
)

func TestConformance(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute) // 24 s on a 2-core machine loaded about 10×
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := redis.StartServers(ctx, composetest.ForTest(t), compose.Spec{Nodes: 1}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := nodes[0].Addr()
	for _, fencing := range []string{"true", "false"} {
		t.Run("fencing="+fencing, func(t *testing.T) {
			locktest.Run(t, func(t testing.TB) locker.Locker {
				l, err := backends.Open("redis", backends.Config{Addrs: []string{addr}, Params: map[string]string{"fencing": fencing}})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, locktest.WithSteal(func(t testing.TB, key string) {
				c := goredis.NewClient(&goredis.Options{Addr: addr})
				defer c.Close()
				if err := c.Del(context.Background(), key).Err(); err != nil {
					t.Fatal(err)
				}
			}))
		})
	}
}

func TestOpenRejectsBadConfig(t *testing.T) {
	addr := []string{"127.0.0.1:1"}
	backendstest.RefusesBadConfigs(t, "redis", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "two addresses", Config: backends.Config{Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}}, Want: `"127.0.0.1:2"`},
		{Name: "unknown param", Config: backends.Config{Addrs: addr, Params: map[string]string{"fencnig": "true"}}, Want: "fencnig"},
		{Name: "bad boolean", Config: backends.Config{Addrs: addr, Params: map[string]string{"fencing": "yes please"}}, Want: `"yes please"`},
		{Name: "empty address", Config: backends.Config{Addrs: []string{""}}, Want: "empty"},
	})
}
