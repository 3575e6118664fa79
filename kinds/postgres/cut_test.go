package postgres_test

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/remote"
)

// netnsOf is the network namespace of a node started with Netns: its
// host's, a remote.Local in that namespace.
func netnsOf(t *testing.T, n *compose.Node) *os.File {
	t.Helper()
	l, ok := n.Host().(remote.Local)
	if !ok || l.Netns == nil {
		t.Fatalf("%s runs in no network namespace of its own", n.Name)
	}
	return l.Netns
}

// inside returns a pgx config that dials n from inside its own network
// namespace: a client on the server's side of any cut of its clients.
func inside(t *testing.T, n *compose.Node) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(postgres.URL(n.ServerAddr()))
	if err != nil {
		t.Fatal(err)
	}
	ns := netnsOf(t, n)
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := remote.InNetns(ns, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return cfg
}

// sysctl reads a setting of n's network namespace.
func sysctl(t *testing.T, n *compose.Node, name string) string {
	t.Helper()
	var v []byte
	err := remote.InNetns(netnsOf(t, n), func() error {
		var err error
		v, err = os.ReadFile("/proc/sys/net/ipv4/" + name)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(v))
}

// TestPostgresAdvisoryLockUnderCut measures how long a PostgreSQL server
// keeps the advisory lock of a holder whose connection a partition cuts:
// the server frees it only when it ends the holder's session, which, for
// an idle session, only its TCP keepalives make it do. With the system's
// defaults (tcp_keepalives_* = 0: idle 7200 s, then 9 probes 75 s apart)
// that is over two hours, so within the test the lock stays held; with
// idle 1 s, interval 1 s, count 3 and a TCP user timeout of 4 s it goes
// after about 4 s. Keepalives alone do not bound it: they run only while
// nothing the server sent is unacknowledged, and when the cut falls before
// the holder's (delayed) ACK of the lock's reply the server retransmits
// for ~15 min instead (a fresh clone's make test saw the lock held 30 s
// after the cut) — tcp_user_timeout bounds that case, which is why the
// backend's keepalive param sets both. A client on the server's side of
// the cut watches pg_locks.
func TestPostgresAdvisoryLockUnderCut(t *testing.T) {
	composetest.StartsServers(t)
	if err := compose.PeerNetworkAvailable(); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name     string
		settings [][2]string
		// freed bounds when the lock must be gone; 0: it must be held
		// after held.
		freed, held time.Duration
	}{
		{name: "default keepalives", held: 20 * time.Second},
		{name: "keepalives 1s+3x1s, user timeout 4s", settings: [][2]string{{"tcp_keepalives_idle", "1"}, {"tcp_keepalives_interval", "1"}, {"tcp_keepalives_count", "3"}, {"tcp_user_timeout", "4000"}}, freed: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			n, err := postgres.StartServer(ctx, composetest.ForTest(t), compose.Spec{Netns: true}, postgres.Options{Config: tc.settings})
			if err != nil {
				t.Fatal(err)
			}
			if tc.settings == nil {
				t.Logf("the server's namespace: tcp_keepalive_time %s s, intvl %s s, probes %s",
					sysctl(t, n, "tcp_keepalive_time"), sysctl(t, n, "tcp_keepalive_intvl"), sysctl(t, n, "tcp_keepalive_probes"))
			}
			holder, err := pgx.Connect(ctx, postgres.URL(n.ServerAddr()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { holder.Close(context.Background()) })
			if _, err := holder.Exec(ctx, "select pg_advisory_lock(42)"); err != nil {
				t.Fatal(err)
			}
			watcher, err := pgx.ConnectConfig(ctx, inside(t, n))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { watcher.Close(context.Background()) })
			held := func() bool {
				var k int
				if err := watcher.QueryRow(ctx, "select count(*) from pg_locks where locktype = 'advisory' and objid = 42").Scan(&k); err != nil {
					t.Fatal(err)
				}
				return k > 0
			}
			if !held() {
				t.Fatal("the lock is not held before the cut")
			}

			if err := n.CutClients(); err != nil {
				t.Fatal(err)
			}
			cut := time.Now()
			// The holder cannot reach the server: its request times out.
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = holder.Exec(qctx, "select 1")
			cancel()
			if err == nil {
				t.Fatal("the holder reached the server through the cut")
			}
			limit := max(tc.freed, tc.held)
			for held() {
				if time.Since(cut) > limit {
					break
				}
				time.Sleep(100 * time.Millisecond) // polling pg_locks
			}
			after := time.Since(cut).Round(100 * time.Millisecond)
			switch stillHeld := held(); {
			case tc.freed > 0 && stillHeld:
				t.Fatalf("the cut-off holder's lock is still held %v after the cut", after)
			case tc.freed > 0:
				t.Logf("the server freed the cut-off holder's lock %v after the cut", after)
			case !stillHeld:
				t.Fatalf("the lock went %v after the cut, with the default keepalives", after)
			default:
				t.Logf("the cut-off holder's lock is still held %v after the cut", after)
			}
			if err := n.HealClients(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
