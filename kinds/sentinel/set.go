package sentinel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/kinds/redis"
)

// Options is what a master–replica set watched by Redis Sentinel takes
// beyond a compose.Spec, whose Nodes counts the master and its replicas.
// The zero values are a usable small set: one master, one replica, three
// sentinels.
//
// The Spec's mechanisms apply to the Redis nodes. LazyFS puts the dir of
// each (its data, and the redis.conf Sentinel rewrites) on a lazy
// filesystem; the sentinels keep their files on the disk: what they know
// is no lock's data. FakeClock moves the nodes' clocks (the master
// expires its keys by its own; a replica deletes what its master's
// expiries tell it to); the sentinels run on the real clock, since a
// sentinel whose clock jumps enters its TILT mode and acts on nothing for
// 30 s, another fault, which would hide what the master's clock alone
// does. Proxied puts the sentinels behind proxies too; they report the
// servers' own addresses, so dial through Set.Dial.
//
// Netns puts each Redis node in a namespace of its own, announcing its
// address there (replica-announce-ip) and replicating through the
// namespaces' router; the sentinels stay on this host, beside the
// clients. So a cut of a node's clients (CutClients) keeps its
// replication up but cuts the sentinels off from it too, as a partition
// between an application's hosts and its Redis master does: the sentinels
// mark a cut master down after DownAfter and promote a replica unless the
// cut heals first (CurrentMaster reads the outcome back).
//
// On places the master on On[0] and a replica on each other placement,
// each announcing its placement's address; a replica's replication link
// (ReplicationLinks) is then a pair of blackhole rules on its host and
// the master's. On needs SentinelsOn.
type Options struct {
	// Sentinels is the number of redis-sentinel processes; 0 means 3. The
	// quorum is a majority of them.
	Sentinels int
	// MasterName is the name the sentinels monitor the set by; "" means
	// "lockbench".
	MasterName string
	// DownAfter is how long a node may fail to answer before a sentinel
	// considers it down (down-after-milliseconds); 0 means 1 s, which
	// makes an automatic failover take a few seconds.
	DownAfter time.Duration
	// FailoverTimeout is Sentinel's failover-timeout; 0 means 5 s, or
	// 10 min with ProxiedReplication (see there).
	FailoverTimeout time.Duration
	// ProxiedReplication makes each replica replicate from the master
	// through its own Proxy (Set.ReplicationLinks), so that a
	// fault can hold replication back while clients keep writing to the
	// master: the write a failover then loses. Sentinels and clients still
	// reach every node directly.
	//
	// Sentinel repoints a replica whose master address is not the
	// monitored one ("+fix-slave-config") once failover-timeout has
	// passed, which would route replication around the proxy; so with
	// ProxiedReplication FailoverTimeout defaults to 10 minutes. A failed
	// election is retried only after twice that, but with three sentinels
	// on one machine elections do not fail. The links carry only the
	// initial master's replication: replicas reconfigured by a failover
	// replicate from the new master directly.
	//
	// The proxies run on this host, where a cut of a node's clients would
	// take the replication with it: ProxiedReplication excludes Netns and
	// placement on hosts.
	ProxiedReplication bool
	// SentinelsOn places the sentinels, one per placement (Sentinels is
	// then len(SentinelsOn), or 0), each listening on its placement's
	// address and Port (26379 is Sentinel's own) and announcing that
	// address to the others. Each runs the placement's Binary (or
	// redis-server) with --sentinel, which is what redis-sentinel is, on
	// the real clock. A sentinel beside a Redis node shares that host's
	// address, so what cuts that address off cuts the sentinel too: a
	// cut of the clients (CutClients) leaves the sentinels on the hosts
	// where the Redis nodes are on the servers' side, still seeing the
	// master; a held-back replication link (ReplicationLinks) cuts the
	// sentinel beside the replica off from the master's port too. Put a
	// sentinel on a host of its own (or a client host) to choose
	// otherwise. It goes with a Spec's On.
	SentinelsOn []compose.Placement
	// Programs are the set's programs on this machine; a field left empty
	// is DefaultPrograms'.
	Programs Programs
}

// Programs are what a Sentinel set needs on this machine. A node or
// sentinel placed on a host runs its placement's Binary there, or
// redis-server (a sentinel as redis-server --sentinel).
type Programs struct {
	// Server is the redis-server binary of the Redis nodes.
	Server string
	// Sentinel is the redis-sentinel binary.
	Sentinel string
}

// SentinelEnv is the environment variable DefaultPrograms reads for
// Programs.Sentinel; Server is the redis kind's (redis.ServerEnv).
const SentinelEnv = "LOCKBENCH_REDIS_SENTINEL"

// DefaultPrograms returns Debian's redis-server and redis-sentinel (the
// ones make deps installs), each replaced by its environment variable
// when that is set.
func DefaultPrograms() Programs {
	return Programs{Server: redis.DefaultPrograms().Server, Sentinel: cmp.Or(os.Getenv(SentinelEnv), "redis-sentinel")}
}

// Rules are what a Sentinel set accepts of a compose.Spec: every
// mechanism; with Netns each Redis node listens on port 6379 of its
// address.
var Rules = compose.Rules{Nodes: "Redis nodes in a Sentinel set", Min: 2, Default: 2, Durability: compose.DurabilityFast}

// Set is a Redis master with replicas and the sentinels that watch
// them and promote a replica when the master fails.
//
// Every node and sentinel runs from a config file in its dir that Sentinel
// rewrites as roles change, so Restart(ctx, true) brings a node back in the
// role it last had (a killed master comes back a master until the
// sentinels demote it, as in production). Restart(ctx, false) loses the
// file too: the node comes back following the master the sentinels report.
type Set struct {
	// MasterName is the name the sentinels know the set by.
	MasterName string
	// Master is the initial master; after a failover it may be a replica
	// (CurrentMaster tells).
	Master *compose.Node
	// Replicas are the initial replicas of Master.
	Replicas []*compose.Node
	// Sentinels are the redis-sentinel processes.
	Sentinels []*compose.Node
	// ReplicationLinks[i] carries Replicas[i]'s replication stream from
	// Master: a Proxy when the set was started with ProxiedReplication,
	// blackhole rules on the two hosts when it was placed on hosts (On);
	// empty otherwise. Partition a link to hold replication back.
	ReplicationLinks []ReplicationLink
	// SentinelsSide says where the sentinels sit relative to a cut of a
	// Redis node's clients (CutClients), in words: on the clients' side
	// (they lose the node with them), or on the servers' (they keep it).
	SentinelsSide string

	quorum int
}

// A ReplicationLink is the path one replica's replication stream takes
// from its master, which a fault holds back (the write a failover then
// loses) while clients and sentinels keep reaching every node.
type ReplicationLink interface {
	// Partition holds the stream back until Heal: every packet of it is
	// dropped, and the link proven cut.
	Partition() error
	// Heal lets the stream flow again.
	Heal() error
}

// StartSet starts, in env, a Redis master and s.Nodes-1 replicas and o.Sentinels
// sentinels on 127.0.0.1 (the Redis nodes in network namespaces of their
// own with Netns), or on hosts (On, SentinelsOn), and waits until every
// replica's link to the master is up and every sentinel knows the master,
// every replica and the other sentinels — until a failover can succeed.
func StartSet(ctx context.Context, env *compose.Env, s compose.Spec, o Options) (*Set, error) {
	s, err := s.Resolve(Rules)
	if err != nil {
		return nil, err
	}
	if o.Sentinels < 0 {
		return nil, fmt.Errorf("sentinel: %d sentinels: need at least 1", o.Sentinels)
	}
	if o.DownAfter < 0 || o.FailoverTimeout < 0 {
		return nil, fmt.Errorf("sentinel: negative Sentinel timeout (down-after %v, failover-timeout %v)", o.DownAfter, o.FailoverTimeout)
	}
	replicas := s.Nodes - 1
	sentinels := cmp.Or(o.Sentinels, 3)
	placed := s.On != nil || o.SentinelsOn != nil
	if placed {
		if err := o.checkPlaced(s); err != nil {
			return nil, err
		}
		sentinels = len(o.SentinelsOn)
	}
	name := o.MasterName
	if name == "" {
		name = "lockbench"
	}
	if strings.ContainsAny(name, " \t\r\n\"'") {
		return nil, fmt.Errorf("sentinel: Sentinel master name %q: no spaces or quotes", name)
	}
	downAfter := cmp.Or(o.DownAfter, time.Second)
	failoverTimeout := o.FailoverTimeout
	if failoverTimeout == 0 {
		failoverTimeout = 5 * time.Second
		if o.ProxiedReplication {
			failoverTimeout = 10 * time.Minute
		}
	}
	if s.Netns && o.ProxiedReplication {
		return nil, errors.New("sentinel: a Sentinel set with Netns and ProxiedReplication: the replication links' proxies run on this host, " +
			"where a cut of a node's clients would cut its replication too; choose one")
	}
	var (
		l, sl                 compose.Layout
		redisBin, sentinelBin string
		progs                 = o.Programs
	)
	def := DefaultPrograms()
	progs.Server, progs.Sentinel = cmp.Or(progs.Server, def.Server), cmp.Or(progs.Sentinel, def.Sentinel)
	if placed {
		if l, err = compose.LayOutOn("Sentinel", s.On); err != nil {
			return nil, err
		}
		if sl, err = compose.LayOutOn("sentinel", o.SentinelsOn); err != nil {
			return nil, err
		}
	} else {
		if redisBin, err = exec.LookPath(progs.Server); err != nil {
			return nil, fmt.Errorf("sentinel: %w (install Debian's redis-server: make deps)", err)
		}
		if sentinelBin, err = exec.LookPath(progs.Sentinel); err != nil {
			return nil, fmt.Errorf("sentinel: %w (install Debian's redis-sentinel: make deps)", err)
		}
		if l, err = env.LayOut(s.Nodes, s.Netns, 6379); err != nil {
			return nil, err
		}
		if sl, err = env.LayOut(sentinels, false, 0); err != nil {
			return nil, err
		}
	}
	set := &Set{MasterName: name, quorum: sentinels/2 + 1, SentinelsSide: sentinelsSide(placed, s.Netns)}

	// Each Redis node runs from its own redis.conf, which Sentinel
	// rewrites (CONFIG REWRITE) when it promotes or repoints the node, so
	// that a node restarted with its data keeps its role, as in a real
	// deployment.
	redisSpec := func(i int, name, replicaOf string) compose.NodeSpec {
		host, port := l.Hosts[i], l.Ports[i][0]
		self, started := compose.HostAddr(host, port), false
		sp := compose.NodeSpec{
			Name: name, Port: port, Binary: redisBin,
			Ready: redis.Ready(self), Clock: redis.ServerTime,
		}
		l.Place(&sp, i)
		if l.Places != nil {
			sp.Binary = cmp.Or(l.Places[i].Binary, progs.Server)
		}
		const conf = "redis.conf"
		sp.Args = []string{path.Join(env.NodeDir(sp), conf)}
		sp.Prepare = func(ctx context.Context, n *compose.Node) error {
			if ok, err := n.Exists(ctx, path.Join(n.Dir, conf)); ok || err != nil {
				return err
			}
			upstream := replicaOf
			if started {
				// The node lost its files: like a node an operator
				// reinstalls, it takes its master from the sentinels.
				askCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				if cur, err := set.currentMaster(askCtx, ""); err == nil {
					upstream = cur
				}
			}
			started = true
			// The dir by its full path: a node on a lazy filesystem starts
			// outside it (see Node.spawn). It announces the address it
			// listens on, which the sentinels report and clients dial.
			args := append(redis.Args(host, port, n.Dir, s.Durability),
				"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
				"--replica-announce-ip", host, "--replica-announce-port", strconv.Itoa(port))
			if upstream != "" && upstream != self {
				host, p, _ := net.SplitHostPort(upstream)
				args = append(args, "--replicaof", host, p)
			}
			return n.WriteFiles(ctx, map[string]string{conf: redisConf(args)})
		}
		return sp
	}
	set.Master, err = env.StartNode(ctx, s, redisSpec(0, env.NewNames("redis-master", 1)[0], ""))
	if err != nil {
		return nil, err
	}
	for i, rname := range env.NewNames("redis-replica", replicas) {
		upstream := set.Master.ServerAddr()
		var link *compose.Proxy
		if o.ProxiedReplication {
			if link, err = env.Proxy(rname+"-link", upstream); err != nil {
				return nil, err
			}
			upstream = link.Addr()
		}
		n, err := env.StartNode(ctx, s, redisSpec(1+i, rname, upstream))
		if err != nil {
			return nil, err
		}
		set.Replicas = append(set.Replicas, n)
		switch {
		case link != nil:
			set.ReplicationLinks = append(set.ReplicationLinks, link)
		case placed:
			hl, err := env.NewHostLink(set.Master, n)
			if err != nil {
				return nil, err
			}
			set.ReplicationLinks = append(set.ReplicationLinks, hl)
		}
	}
	// Sentinels see the replicas in the master's INFO as soon as they
	// connect when the links are up first; otherwise they wait for the
	// next INFO, 10 s later.
	if err := compose.Poll(ctx, compose.ReadyTimeout, set.replicationUp); err != nil {
		return nil, fmt.Errorf("sentinel: Sentinel replicas not in sync: %w", err)
	}

	initial := set.Master.ServerAddr()
	for i, sname := range env.NewNames("sentinel", sentinels) {
		host, port := sl.Hosts[i], sl.Ports[i][0]
		sp := compose.NodeSpec{Name: sname, Port: port, Host: host, Binary: sentinelBin, Ready: set.sentinelAnswers(compose.HostAddr(host, port))}
		sl.Place(&sp, i)
		const conf = "sentinel.conf"
		sp.Args = []string{path.Join(env.NodeDir(sp), conf)}
		if sl.Places != nil {
			// redis-sentinel is redis-server under another name: the
			// host needs the one program only.
			sp.Binary, sp.Args = cmp.Or(sl.Places[i].Binary, progs.Server), append(sp.Args, "--sentinel")
		}
		sp.Prepare = func(ctx context.Context, n *compose.Node) error {
			// A sentinel rewrites its file with what it learns: keep it
			// across Restart(true). A fresh one monitors the master the
			// others report.
			if ok, err := n.Exists(ctx, path.Join(n.Dir, conf)); ok || err != nil {
				return err
			}
			master := initial
			askCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if cur, err := set.currentMaster(askCtx, sname); err == nil {
				master = cur
			}
			mhost, mport, _ := net.SplitHostPort(master)
			// A sentinel tells the others where it listens in its hellos,
			// which carry by default the address it reaches the nodes
			// from: with Netns, this host's address in their network,
			// where it does not listen.
			text := fmt.Sprintf("port %d\nbind %s\ndaemonize no\nprotected-mode no\nlogfile \"\"\ndir %q\nsentinel announce-ip "+
				"%s\n", port, host, n.Dir, host) +
				fmt.Sprintf("sentinel monitor %s %s %s %d\n", name, mhost, mport, set.quorum) +
				fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", name, downAfter.Milliseconds()) +
				fmt.Sprintf("sentinel failover-timeout %s %d\n", name, failoverTimeout.Milliseconds()) +
				fmt.Sprintf("sentinel parallel-syncs %s 1\n", name)
			return n.WriteFiles(ctx, map[string]string{conf: text})
		}
		// The sentinels keep their files on the disk and run on the real
		// clock (see SentinelOptions).
		n, err := env.StartNode(ctx, compose.Spec{Proxied: s.Proxied}, sp)
		if err != nil {
			return nil, err
		}
		set.Sentinels = append(set.Sentinels, n)
	}
	if err := compose.Poll(ctx, compose.ReadyTimeout, set.sentinelsReady); err != nil {
		return nil, fmt.Errorf("sentinel: sentinels of %s not Ready: %w", name, err)
	}
	return set, nil
}

// probeOptions are go-redis options for the set's own short probes.
func probeOptions(addr string) *goredis.Options {
	return &goredis.Options{
		Addr: addr, MaxRetries: -1, PoolSize: 1, DisableIdentity: true,
		DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
	}
}

// replicationUp answers nil when every replica reports its master link up.
func (s *Set) replicationUp(ctx context.Context) error {
	for _, r := range s.Replicas {
		c := goredis.NewClient(probeOptions(r.ServerAddr()))
		info, err := c.Info(ctx, "replication").Result()
		c.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", r.Name, err)
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("%s: master link not up", r.Name)
		}
	}
	return nil
}

// sentinelAnswers is a sentinel's own readiness: it answers for the set.
func (s *Set) sentinelAnswers(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c := goredis.NewSentinelClient(probeOptions(addr))
		defer c.Close()
		return c.GetMasterAddrByName(ctx, s.MasterName).Err()
	}
}

// sentinelsReady answers nil when every sentinel reports the initial
// master, sees every replica healthy and knows every other sentinel.
func (s *Set) sentinelsReady(ctx context.Context) error {
	want := s.Master.ServerAddr()
	for _, sn := range s.Sentinels {
		c := goredis.NewSentinelClient(probeOptions(sn.ServerAddr()))
		err := func() error {
			m, err := c.GetMasterAddrByName(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			if got := net.JoinHostPort(m[0], m[1]); got != want {
				return fmt.Errorf("reports master %s, want %s", got, want)
			}
			reps, err := c.Replicas(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			seen := map[string]bool{}
			for _, r := range reps {
				if r["flags"] == "slave" && r["master-link-status"] == "ok" {
					seen[r["name"]] = true
				}
			}
			for _, r := range s.Replicas {
				if !seen[r.ServerAddr()] {
					return fmt.Errorf("does not see replica %s in sync", r.ServerAddr())
				}
			}
			peers, err := c.Sentinels(ctx, s.MasterName).Result()
			if err != nil {
				return err
			}
			if len(peers) != len(s.Sentinels)-1 {
				return fmt.Errorf("knows %d other sentinels, want %d", len(peers), len(s.Sentinels)-1)
			}
			return nil
		}()
		c.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", sn.Name, err)
		}
	}
	return nil
}

// redisConf turns redis-server command-line arguments ("--name", values
// ...) into redis.conf lines.
func redisConf(args []string) string {
	var b strings.Builder
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--"):
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(strings.TrimPrefix(a, "--"))
		default:
			b.WriteString(" " + strconv.Quote(a))
		}
	}
	b.WriteByte('\n')
	return b.String()
}
