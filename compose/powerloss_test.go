package compose_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/postgres"
	rediskind "github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/kinds/zookeeper"
)

// A journal is a server's append-only record of numbered writes, one per
// trial, that a test counts after a power loss.
type journal interface {
	// setup makes what a trial's writes need (a table, a parent znode).
	setup(ctx context.Context, trial int) error
	// append makes write i of the trial.
	append(ctx context.Context, trial, i int) error
	// count returns how many writes of the trial the server has.
	count(ctx context.Context, trial int) (int, error)
	close()
}

// durableServer is a server kind under power losses.
type durableServer struct {
	name  string
	start func(ctx context.Context, e *compose.Env, d compose.Durability) (*compose.Node, error)
	open  func(t *testing.T, n *compose.Node) journal
	// noPeriodic: the kind has no periodic profile.
	noPeriodic bool
}

var durableServers = []durableServer{
	{
		name: "redis",
		start: func(ctx context.Context, e *compose.Env, d compose.Durability) (*compose.Node, error) {
			ns, err := rediskind.StartServers(ctx, e, compose.Spec{Nodes: 1, Durability: d, LazyFS: true}, rediskind.Options{})
			if err != nil {
				return nil, err
			}
			return ns[0], nil
		},
		open: func(t *testing.T, n *compose.Node) journal {
			return redisJournal{redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, ReadTimeout: 2 * time.Second})}
		},
	},
	{
		name: "postgres",
		start: func(ctx context.Context, e *compose.Env, d compose.Durability) (*compose.Node, error) {
			return postgres.StartServer(ctx, e, compose.Spec{Durability: d, LazyFS: true}, postgres.Options{})
		},
		open: func(t *testing.T, n *compose.Node) journal {
			c, err := pgx.Connect(context.Background(), postgres.URL(n.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			return pgJournal{c}
		},
	},
	{
		name: "zookeeper",
		start: func(ctx context.Context, e *compose.Env, d compose.Durability) (*compose.Node, error) {
			z, err := zookeeper.StartEnsemble(ctx, e, compose.Spec{Nodes: 1, Durability: d, LazyFS: true}, zookeeper.Options{})
			if err != nil {
				return nil, err
			}
			return z.Nodes[0], nil
		},
		open: func(t *testing.T, n *compose.Node) journal {
			c, _, err := zk.Connect([]string{n.Addr()}, 4*time.Second, zk.WithLogger(zookeeper.NoLog{}))
			if err != nil {
				t.Fatal(err)
			}
			return zkJournal{c}
		},
		noPeriodic: true,
	},
	{
		name: "etcd",
		start: func(ctx context.Context, e *compose.Env, d compose.Durability) (*compose.Node, error) {
			c, err := etcd.StartCluster(ctx, e, compose.Spec{Nodes: 1, Durability: d, LazyFS: true}, etcd.Options{})
			if err != nil {
				return nil, err
			}
			return c.Nodes[0], nil
		},
		open: func(t *testing.T, n *compose.Node) journal {
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{n.Addr()}, DialTimeout: time.Second, Logger: zap.NewNop()})
			if err != nil {
				t.Fatal(err)
			}
			return etcdJournal{c}
		},
		noPeriodic: true,
	},
}

// TestPowerLoss writes to a server on a lazy filesystem for a while, cuts
// its power while it writes, restarts it and counts what it kept of the
// writes it acknowledged: nothing under the fast profile, everything
// under the durable one, and under the periodic one less than everything
// (the last moment's writes) in at least one of three trials.
func TestPowerLoss(t *testing.T) {
	composetest.NeedsLazyFS(t)
	for _, s := range durableServers {
		for _, d := range compose.Durabilities() {
			t.Run(s.name+"/"+string(d), func(t *testing.T) {
				composetest.StartsServersWithin(t, 3*time.Minute) // up to 63 s on a 2-core machine loaded about 10×
				ctx := context.Background()
				env := composetest.ForTest(t)
				n, err := s.start(ctx, env, d)
				if d == compose.DurabilityPeriodic && s.noPeriodic {
					if !errors.Is(err, compose.ErrNoDurability) {
						t.Fatalf("%s with the periodic profile: %v; want an error wrapping ErrNoDurability", s.name, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("%v\nwhy, from its log:\n%s", err, whyEnv(env))
				}
				trials := 1
				if d == compose.DurabilityPeriodic {
					trials = 3
				}
				lostAny := false
				for trial := range trials {
					acked, kept := powerLossTrial(t, s, n, trial)
					if kept > acked+1 {
						t.Fatalf("trial %d: %d writes kept of %d acknowledged (at most one more can have been applied unacknowledged)", trial, kept, acked)
					}
					switch d {
					case compose.DurabilityFast:
						if kept != 0 {
							t.Errorf("fast: %d of %d acknowledged writes survived the power loss; want none", kept, acked)
						}
					case compose.DurabilityDurable:
						if kept < acked {
							t.Errorf("durable: %d of %d acknowledged writes survived the power loss; want all", kept, acked)
						}
					}
					if kept < acked {
						lostAny = true
						break
					}
				}
				if d == compose.DurabilityPeriodic && !lostAny {
					t.Errorf("periodic: every acknowledged write survived %d power losses; want the last moment's lost at least once", trials)
				}
			})
		}
	}
}

// powerLossTrial writes to n for 1.5 s and cuts its power while it
// writes, restarts it and returns how many writes it acknowledged and how
// many it kept.
func powerLossTrial(t *testing.T, s durableServer, n *compose.Node, trial int) (acked, kept int) {
	ctx := context.Background()
	j := s.open(t, n)
	if err := j.setup(ctx, trial); err != nil {
		t.Fatal(err)
	}
	// What a trial needs exists before it starts writing.
	if err := n.Writeback(); err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := j.append(wctx, trial, i)
			cancel()
			if err != nil {
				return // the server is gone
			}
			written.Store(int64(i + 1))
		}
	}()
	// Writes for 1.5 s, and at least one: the power goes while they are
	// in flight.
	for begin := time.Now(); time.Since(begin) < 1500*time.Millisecond || written.Load() == 0; {
		select {
		case <-done:
			t.Fatalf("the writes stopped before the power loss, after %d", written.Load())
		case <-time.After(10 * time.Millisecond):
		}
	}
	lost, err := n.PowerLoss()
	if err != nil {
		t.Fatal(err)
	}
	<-done
	acked = int(written.Load())
	j.close()
	start := time.Now()
	if err := n.Start(ctx); err != nil {
		t.Fatalf("restart after the power loss: %v\nwhy, from its log:\n%s", err, why(n))
	}
	j = s.open(t, n)
	defer j.close()
	if kept, err = j.count(ctx, trial); err != nil {
		t.Fatal(err)
	}
	t.Logf("trial %d: %d writes acknowledged, %d kept; the power loss dropped %d files' unsynced changes (%d KiB); restart took %v",
		trial, acked, kept, lost.Files, lost.Bytes>>10, time.Since(start).Round(time.Millisecond))
	return acked, kept
}

// why returns the lines of a node's log that say why it died: a panic
// and the lines after it.
func why(n *compose.Node) string {
	log := n.LogTail(1 << 20)
	for _, mark := range []string{"panic:", "fatal error:", "FATAL", "ERROR", "Exception"} {
		if i := strings.Index(log, mark); i >= 0 {
			return log[i:min(len(log), i+600)]
		}
	}
	return "(nothing)"
}

func whyEnv(e *compose.Env) string {
	var b strings.Builder
	for _, n := range e.Nodes() {
		fmt.Fprintf(&b, "%s: %s\n", n.Name, why(n))
	}
	return b.String()
}

type redisJournal struct{ c *redis.Client }

func (j redisJournal) setup(ctx context.Context, trial int) error { return nil }
func (j redisJournal) append(ctx context.Context, trial, i int) error {
	return j.c.RPush(ctx, fmt.Sprint("journal-", trial), i).Err()
}
func (j redisJournal) count(ctx context.Context, trial int) (int, error) {
	n, err := j.c.LLen(ctx, fmt.Sprint("journal-", trial)).Result()
	return int(n), err
}
func (j redisJournal) close() { j.c.Close() }

type pgJournal struct{ c *pgx.Conn }

func (j pgJournal) setup(ctx context.Context, trial int) error {
	if _, err := j.c.Exec(ctx, "create table if not exists journal (trial int, i int)"); err != nil {
		return err
	}
	// A checkpoint writes the table's commit out, even without fsync
	// (asynchronous commits leave it in memory up to 200 ms).
	_, err := j.c.Exec(ctx, "checkpoint")
	return err
}
func (j pgJournal) append(ctx context.Context, trial, i int) error {
	_, err := j.c.Exec(ctx, "insert into journal values ($1, $2)", trial, i)
	return err
}
func (j pgJournal) count(ctx context.Context, trial int) (int, error) {
	var n int
	err := j.c.QueryRow(ctx, "select count(*) from journal where trial = $1", trial).Scan(&n)
	return n, err
}
func (j pgJournal) close() { j.c.Close(context.Background()) }

type zkJournal struct{ c *zk.Conn }

func (j zkJournal) setup(ctx context.Context, trial int) error {
	_, err := j.c.Create(fmt.Sprint("/journal-", trial), nil, 0, zk.WorldACL(zk.PermAll))
	return err
}
func (j zkJournal) append(ctx context.Context, trial, i int) error {
	_, err := j.c.Create(fmt.Sprintf("/journal-%d/%d", trial, i), nil, 0, zk.WorldACL(zk.PermAll))
	return err
}
func (j zkJournal) count(ctx context.Context, trial int) (int, error) {
	kids, _, err := j.c.Children(fmt.Sprint("/journal-", trial))
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	return len(kids), err
}
func (j zkJournal) close() { j.c.Close() }

type etcdJournal struct{ c *clientv3.Client }

func (j etcdJournal) setup(ctx context.Context, trial int) error { return nil }
func (j etcdJournal) append(ctx context.Context, trial, i int) error {
	_, err := j.c.Put(ctx, fmt.Sprintf("journal-%d/%d", trial, i), "")
	return err
}
func (j etcdJournal) count(ctx context.Context, trial int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := j.c.Get(ctx, fmt.Sprintf("journal-%d/", trial), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return int(resp.Count), nil
}
func (j etcdJournal) close() { j.c.Close() }
