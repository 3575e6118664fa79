package postgres

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	postgreskind "github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/locker/locktest"
)

// shared is the server the conformance suite, the small tests and the
// benchmarks share, under the fast profile, so that a loaded disk does not
// stall the short TTLs of the tests; fault tests start their own.
var shared = composetest.NewShared(func(ctx context.Context, e *compose.Env) (string, error) {
	n, err := postgreskind.StartServer(ctx, e, compose.Spec{Durability: compose.DurabilityFast}, postgreskind.Options{})
	if err != nil {
		return "", err
	}
	return n.Addr(), nil
})

func TestMain(m *testing.M) { os.Exit(composetest.RunTests(m, shared)) }

// server starts a server of the test's own.
func server(t testing.TB, s compose.Spec, o postgreskind.Options) *compose.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := postgreskind.StartServer(ctx, composetest.ForTest(t), s, o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// open opens a Locker on addr through the registry in mode, with params;
// the caller closes it.
func open(t testing.TB, addr string, mode Mode, params map[string]string) *Locker {
	t.Helper()
	p := map[string]string{"mode": string(mode)}
	for k, v := range params {
		p[k] = v
	}
	return backendstest.Open(t, "postgres", backends.Config{Addrs: []string{addr}, Params: p}).(*Locker)
}

// openClosed is open with a Close when the test ends.
func openClosed(t testing.TB, addr string, mode Mode) *Locker {
	t.Helper()
	l := open(t, addr, mode, nil)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// admin is a plain connection for a test's own statements, closed when the
// test ends.
func admin(t testing.TB, addr string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, postgreskind.URL(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// holderPID returns the pid of the session holding key's advisory lock,
// or 0.
func holderPID(t testing.TB, c *pgx.Conn, key string) int {
	t.Helper()
	u := uint64(keyID(key))
	var pid int
	err := c.QueryRow(context.Background(), `SELECT coalesce((SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1), 0)`, int64(u>>32), int64(u&0xffffffff)).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// terminate ends the session holding key's advisory lock from another
// session, as an operator's pg_terminate_backend does, and waits until it
// has gone (termination is asynchronous).
func terminate(t testing.TB, c *pgx.Conn, key string) {
	t.Helper()
	pid := holderPID(t, c, key)
	if pid == 0 {
		t.Fatalf("no session holds %q", key)
	}
	ctx := context.Background()
	if _, err := c.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	locktest.WaitFor(t, 10*time.Second, "end of the terminated session", func() bool {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// giveAway hands key's lease row to another holder behind its holder's
// back, keeping its token and expiry.
func giveAway(t testing.TB, c *pgx.Conn, key string) {
	t.Helper()
	tag, err := c.Exec(context.Background(), "UPDATE "+DefaultTable+" SET holder = gen_random_uuid() WHERE key = $1", key)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("give %q away: %v (%d rows)", key, err, tag.RowsAffected())
	}
}
