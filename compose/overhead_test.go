package compose_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
)

// BenchmarkLazyFS measures what a lazy filesystem costs a server: one
// client's writes, each acknowledged once durable (Redis appendfsync
// always, PostgreSQL fsync and synchronous commit), and Redis's
// appendfsync everysec, with the server's dir on a plain dir and on a
// lazy filesystem, in the same run. Compare with benchstat; ns/op is per
// acknowledged write.
func BenchmarkLazyFS(b *testing.B) {
	if err := compose.LazyFSAvailable(); err != nil {
		b.Skip(err)
	}
	for _, d := range []compose.Durability{compose.DurabilityDurable, compose.DurabilityPeriodic} {
		for _, lazy := range []bool{false, true} {
			b.Run(fmt.Sprintf("redis/%s/lazyfs=%v", d, lazy), func(b *testing.B) {
				s := compose.Spec{Nodes: 1, Durability: d, LazyFS: lazy}
				ns, err := rediskind.StartServers(context.Background(), composetest.ForTest(b), s, rediskind.Options{})
				if err != nil {
					b.Fatal(err)
				}
				benchRedisSet(b, ns[0])
			})
		}
	}
	for _, lazy := range []bool{false, true} {
		b.Run(fmt.Sprintf("postgres/durable/lazyfs=%v", lazy), func(b *testing.B) {
			ctx := context.Background()
			s := compose.Spec{Durability: compose.DurabilityDurable, LazyFS: lazy}
			n, err := postgres.StartServer(ctx, composetest.ForTest(b), s, postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			c := pgConnect(b, ctx, n.Addr())
			if _, err := c.Exec(ctx, "create table t (i int)"); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := c.Exec(ctx, "insert into t values ($1)", i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchRedisSet times one client's SETs on n.
func benchRedisSet(b *testing.B, n *compose.Node) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: n.Addr(), PoolSize: 1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		if err := c.Set(ctx, "k", i, 0).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// pgConnect connects to a PostgreSQL server, through addr, until
// the test ends.
func pgConnect(t testing.TB, ctx context.Context, addr string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctx, postgres.URL(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
