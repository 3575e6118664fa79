package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/backends"
	_ "github.com/lockbench/lockbench/backends/redis"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
	goredis "github.com/redis/go-redis/v9"
)

func TestConformance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := compose.ForTest(t).Redis(ctx, 1, compose.RedisOptions{})
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
	for name, cfg := range map[string]backends.Config{
		"no address":    {},
		"two addresses": {Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}},
		"unknown param": {Addrs: []string{"127.0.0.1:1"}, Params: map[string]string{"fencnig": "true"}},
		"bad boolean":   {Addrs: []string{"127.0.0.1:1"}, Params: map[string]string{"fencing": "yes please"}},
		"empty address": {Addrs: []string{""}},
	} {
		t.Run(name, func(t *testing.T) {
			if l, err := backends.Open("redis", cfg); err == nil {
				l.Close()
				t.Fatalf("Open(%+v) succeeded", cfg)
			}
		})
	}
}
