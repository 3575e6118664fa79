package compose

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperOptions is what a ZooKeeper ensemble takes beyond a Spec.
//
// Of a Spec's mechanisms, an ensemble takes every one. FakeClock moves
// the wall clock a server stamps znodes with; sessions are timed on the
// monotonic clock. With Netns each server listens on the standard ports
// 2181 (clients), 2888 (quorum) and 3888 (election) of its address.
// Placed on hosts (On), each server listens on its host's address at the
// placement's Port (clients) and PeerPorts (quorum and election: 2888 and
// 3888 if none); its myid, zoo.cfg (naming every server at its host's
// address) and data are in the placement's Dir. Binary is the java
// program on the host ("" finds java on its PATH); the classpath is
// ZooKeeperClasspath, Debian's zookeeper package, there.
type ZooKeeperOptions struct {
	// TickTime is ZooKeeper's unit of time; 0 means 200 ms. Sessions may
	// last from 2 ticks to 60 s, so a small tick makes session-expiry
	// tests fast. initLimit is 10 ticks and syncLimit 5.
	TickTime time.Duration
	// LogLevel is the log4j level of the servers' logs; "" means WARN.
	LogLevel string
	// JVMFlags replace the default JVM flags, which favour a fast start
	// and a small heap (C1 compiler only, serial GC, 256 MB) over peak
	// throughput; pass e.g. {"-Xmx1g"} for benchmarks.
	JVMFlags []string
}

// zkRules are what a ZooKeeper ensemble accepts of a Spec. Its durable
// profile is forceSync=yes, its fast one forceSync=no.
var zkRules = Rules{
	Nodes: "ZooKeeper servers", Min: 1, Odd: true, Durability: DurabilityDurable,
	NoPeriodic: "a server fsyncs its transaction log at every commit (forceSync=yes) or never (forceSync=no)",
}

// zkDefaultJVMFlags start a server in under a second on a small machine.
var zkDefaultJVMFlags = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-UsePerfData"}

// Ensemble is a ZooKeeper ensemble: one standalone server or an odd number
// of servers electing a leader.
type Ensemble struct {
	// Nodes are the servers; Nodes[i] has myid i+1.
	Nodes []*Node

	peers *Peers // what Partition cuts with
}

// ZooKeeper starts an ensemble of s.Nodes servers (an odd number; 1 runs
// a standalone server) and waits until each serves clients: it reports
// its mode (standalone, leader or follower) to the srvr command, which a
// server does only once it has joined a quorum.
func (e *Env) ZooKeeper(ctx context.Context, s Spec, o ZooKeeperOptions) (*Ensemble, error) {
	s, err := s.Resolve(zkRules)
	if err != nil {
		return nil, err
	}
	n := s.Nodes
	tick := cmp.Or(o.TickTime, 200*time.Millisecond)
	if tick < time.Millisecond {
		return nil, fmt.Errorf("compose: ZooKeeper tick time %v: want at least 1ms", o.TickTime)
	}
	level := cmp.Or(o.LogLevel, "WARN")
	switch strings.ToUpper(level) {
	case "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF":
	default:
		return nil, fmt.Errorf("compose: ZooKeeper log level %q: want TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF", level)
	}
	var java string
	if s.On == nil {
		if java, err = exec.LookPath(e.Programs.Java); err != nil {
			return nil, fmt.Errorf("compose: %w (ZooKeeper needs Java: make deps)", err)
		}
		for _, p := range e.Programs.ZooKeeperClasspath {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("compose: ZooKeeper classpath entry %s: %w (install Debian's zookeeper: make deps)", p, err)
			}
		}
	}
	z := &Ensemble{}
	var l Layout
	if s.On != nil {
		if l, err = LayOutOn("ZooKeeper", s.On, 2888, 3888); err != nil {
			return nil, err
		}
	} else if l, err = e.LayOut(n, s.Netns, 2181, 2888, 3888); err != nil { // client, peer, election
		return nil, err
	}
	hosts := l.Hosts
	names := e.NewNames("zookeeper", n)
	var servers strings.Builder
	if n > 1 {
		for i := range n {
			fmt.Fprintf(&servers, "server.%d=%s:%d:%d\n", i+1, hosts[i], l.Ports[i][1], l.Ports[i][2])
		}
	}
	jvm := o.JVMFlags
	if jvm == nil {
		jvm = zkDefaultJVMFlags
	}
	specs := make([]NodeSpec, n)
	for i, name := range names {
		dir := filepath.Join(e.Dir, name)
		if l.Places != nil {
			dir = l.Places[i].Dir
		}
		client := l.Ports[i][0]
		args := append(append([]string(nil), jvm...),
			"-Djava.net.preferIPv4Stack=true",
			"-Dzookeeper.jmx.log4j.disable=true",
			"-Dlog4j.configuration=file:"+filepath.Join(dir, "log4j.properties"),
			"-cp", strings.Join(e.Programs.ZooKeeperClasspath, string(os.PathListSeparator)),
			"org.apache.zookeeper.server.quorum.QuorumPeerMain",
			filepath.Join(dir, "zoo.cfg"))
		cfg := zkConfig(dir, hosts[i], client, tick, s.Durability) + servers.String()
		log4j := "log4j.rootLogger=" + strings.ToUpper(level) + ", CONSOLE\n" +
			"log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n" +
			"log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n" +
			"log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n\n"
		myid := strconv.Itoa(i + 1)
		specs[i] = NodeSpec{
			Name: name, Port: client, Binary: java, Args: args, Clock: zkTime,
			// Written before every start, so that a server restarted
			// without its data still knows who it is.
			Prepare: func(ctx context.Context, n *Node) error {
				return n.WriteFiles(ctx, map[string]string{"myid": myid + "\n", "zoo.cfg": cfg, "log4j.properties": log4j})
			},
			Ready: func(ctx context.Context) error {
				_, err := zkMode(ctx, HostAddr(hosts[i], client))
				return err
			},
		}
		l.Place(&specs[i], i)
		if l.Places != nil {
			specs[i].Binary = cmp.Or(l.Places[i].Binary, e.Programs.Java)
		}
	}
	nodes, err := e.StartNodes(ctx, s, specs)
	if err != nil {
		return nil, err
	}
	z.Nodes = nodes
	if z.peers, err = e.NewPeers("ZooKeeper ensemble", l, nodes); err != nil {
		return nil, err
	}
	return z, nil
}

// zkConfig is a server's zoo.cfg without its server.N lines.
func zkConfig(dir, host string, client int, tick time.Duration, d Durability) string {
	ms := tick.Milliseconds()
	cfg := fmt.Sprintf(`tickTime=%d
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=%s
minSessionTimeout=%d
maxSessionTimeout=60000
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,mntr,stat
autopurge.purgeInterval=0
`, ms, dir, client, host, 2*ms)
	if d == DurabilityFast {
		cfg += "forceSync=no\n"
	} else {
		cfg += "forceSync=yes\n"
	}
	return cfg
}

// Addrs returns the addresses clients should connect to (the proxies when
// the ensemble is Proxied).
func (z *Ensemble) Addrs() []string {
	addrs := make([]string, len(z.Nodes))
	for i, n := range z.Nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Mode asks a server what it is: "standalone", "leader", "follower" or
// "observer". A server that is not serving (electing, or not in a quorum)
// answers with an error.
func (z *Ensemble) Mode(ctx context.Context, n *Node) (string, error) {
	mode, err := zkMode(ctx, n.ServerAddr())
	if err != nil {
		return "", fmt.Errorf("compose: mode of %s: %w", n.Name, err)
	}
	return mode, nil
}

// Leader returns the server that leads the ensemble (the standalone
// server when there is one): of the servers that answer within a second
// and say they lead, the one of the highest epoch (a leader cut off from
// its followers says it leads until it notices, about syncLimit ticks).
// Servers that do not answer — killed, paused or electing — are skipped;
// it is an error if none leads.
func (z *Ensemble) Leader(ctx context.Context) (*Node, error) {
	leader, err := LeaderOf(ctx, z.Nodes, func(ctx context.Context, i int) (bool, uint64, error) {
		mode, zxid, err := zkStatus(ctx, z.Nodes[i].ServerAddr())
		return mode == "leader" || mode == "standalone", zxid >> 32, err
	})
	if err != nil {
		return nil, fmt.Errorf("compose: no ZooKeeper leader: %w", err)
	}
	return leader, nil
}

// AwaitLeader waits until a server other than old (which may be nil)
// leads the ensemble and returns it: what a leader-kill fault waits for.
// ctx bounds the wait; without a deadline it is one minute.
func (z *Ensemble) AwaitLeader(ctx context.Context, old *Node) (*Node, error) {
	return AwaitLeader(ctx, "ZooKeeper", z.Leader, old)
}

// zkTime writes /lockbench-clock through the server at addr and returns
// the znode's mtime: the wall clock of the leader, which stamps every
// transaction.
func zkTime(ctx context.Context, addr string) (time.Time, error) {
	c, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(zkQuiet{}))
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close()
	for connected := false; !connected; {
		select {
		case ev := <-events:
			connected = ev.State == zk.StateHasSession
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
	const path = "/lockbench-clock"
	st, err := c.Set(path, nil, -1)
	if errors.Is(err, zk.ErrNoNode) {
		if _, err = c.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return time.Time{}, err
		}
		st, err = c.Set(path, nil, -1)
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(st.Mtime), nil
}

// zkQuiet drops the ZooKeeper client's log.
type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

// zkMode sends srvr to the server at addr and returns the mode it reports.
func zkMode(ctx context.Context, addr string) (string, error) {
	mode, _, err := zkStatus(ctx, addr)
	return mode, err
}

// zkStatus sends srvr to the server at addr and returns the mode and the
// zxid it reports; a zxid's upper 32 bits are the epoch of the leader
// that issued it, and a leader starts its epoch at zxid epoch<<32.
func zkStatus(ctx context.Context, addr string) (mode string, zxid uint64, err error) {
	out, err := fourLetterWord(ctx, addr, "srvr")
	if err != nil {
		return "", 0, err
	}
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "Mode: "); ok {
			mode = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Zxid: 0x"); ok {
			if zxid, err = strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil {
				return "", 0, fmt.Errorf("srvr at %s: zxid: %w", addr, err)
			}
		}
	}
	if mode == "" {
		return "", 0, fmt.Errorf("srvr at %s: no mode in %q", addr, strings.TrimSpace(out))
	}
	return mode, zxid, nil
}

// fourLetterWord sends a ZooKeeper four-letter command and returns the
// reply, which ends when the server closes the connection.
func fourLetterWord(ctx context.Context, addr, cmd string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Second)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return "", err
	}
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("%s at %s: %w", cmd, addr, err)
	}
	return string(b), nil
}

// Partition cuts the members into groups that cannot reach each other, as
// Peers.Partition does (see there): the cluster must have been started
// with Netns or on hosts (Spec.On), each member on a host of its own.
func (z *Ensemble) Partition(groups ...[]*Node) error { return z.peers.Partition(groups...) }

// HealPartition lifts the partition in force, if any (Peers.Heal).
func (z *Ensemble) HealPartition() error { return z.peers.Heal() }

// PartitionLeader cuts the current leader off from every other member
// (clients still reach it) and returns it: it can no longer commit
// anything, and the majority elects a new leader.
func (z *Ensemble) PartitionLeader(ctx context.Context) (*Node, error) {
	return z.peers.PartitionLeader(ctx, z.Leader)
}

// AwaitServing waits until every running member serves clients again, as
// after HealPartition or Resume: ctx bounds the wait, and each member may
// take ReadyTimeout.
func (z *Ensemble) AwaitServing(ctx context.Context) error { return z.peers.AwaitServing(ctx) }
