package zookeeper

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

	"github.com/lockbench/lockbench/compose"
)

// Options is what a ZooKeeper ensemble takes beyond a compose.Spec.
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
// Programs.Classpath, Debian's zookeeper package, there.
type Options struct {
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
	// Programs are the servers' programs on this machine; a field left
	// empty is DefaultPrograms'.
	Programs Programs
}

// Programs are what a ZooKeeper server needs on this machine.
type Programs struct {
	// Java is the java binary that runs ZooKeeper.
	Java string
	// Classpath is the classpath of a ZooKeeper server: Debian's
	// package (whose jar names its other dependencies in its manifest)
	// and a log4j binding for slf4j, so that the servers log.
	Classpath []string
}

// The environment variables DefaultPrograms reads, one per field of
// Programs. A classpath is a list of paths (os.PathListSeparator).
const (
	JavaEnv      = "LOCKBENCH_JAVA"
	ClasspathEnv = "LOCKBENCH_ZOOKEEPER_CLASSPATH"
)

// DefaultPrograms returns Debian's java and zookeeper package (the ones
// make deps installs), each replaced by its environment variable when
// that is set.
func DefaultPrograms() Programs {
	p := Programs{
		Java: cmp.Or(os.Getenv(JavaEnv), "java"),
		Classpath: []string{
			"/etc/zookeeper/conf",
			"/usr/share/java/zookeeper.jar",
			"/usr/share/java/slf4j-log4j12.jar",
			"/usr/share/java/log4j-1.2.jar",
		},
	}
	if v := os.Getenv(ClasspathEnv); v != "" {
		p.Classpath = filepath.SplitList(v)
	}
	return p
}

// or fills p's empty fields in from d.
func (p Programs) or(d Programs) Programs {
	p.Java = cmp.Or(p.Java, d.Java)
	if p.Classpath == nil {
		p.Classpath = d.Classpath
	}
	return p
}

// Rules are what a ZooKeeper ensemble accepts of a compose.Spec. Its durable
// profile is forceSync=yes, its fast one forceSync=no.
var Rules = compose.Rules{
	Nodes: "ZooKeeper servers", Min: 1, Odd: true, Durability: compose.DurabilityDurable,
	NoPeriodic: "a server fsyncs its transaction log at every commit (forceSync=yes) or never (forceSync=no)",
}

// zkDefaultJVMFlags start a server in under a second on a small machine.
var zkDefaultJVMFlags = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:-UsePerfData"}

// Ensemble is a ZooKeeper ensemble: one standalone server or an odd number
// of servers electing a leader.
type Ensemble struct {
	// Nodes are the servers; Nodes[i] has myid i+1.
	Nodes []*compose.Node

	peers *compose.Peers // what Partition cuts with
}

// StartEnsemble starts an ensemble of s.Nodes servers in env (an odd
// number; 1 runs a standalone server) and waits until each serves
// clients: it reports its mode (standalone, leader or follower) to the srvr command, which a
// server does only once it has joined a quorum.
func StartEnsemble(ctx context.Context, env *compose.Env, s compose.Spec, o Options) (*Ensemble, error) {
	s, err := s.Resolve(Rules)
	if err != nil {
		return nil, err
	}
	n := s.Nodes
	tick := cmp.Or(o.TickTime, 200*time.Millisecond)
	if tick < time.Millisecond {
		return nil, fmt.Errorf("zookeeper: tick time %v: want at least 1ms", o.TickTime)
	}
	level := cmp.Or(o.LogLevel, "WARN")
	switch strings.ToUpper(level) {
	case "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF":
	default:
		return nil, fmt.Errorf("zookeeper: log level %q: want TRACE, DEBUG, INFO, WARN, ERROR, FATAL or OFF", level)
	}
	progs := o.Programs.or(DefaultPrograms())
	var java string
	if s.On == nil {
		if java, err = exec.LookPath(progs.Java); err != nil {
			return nil, fmt.Errorf("zookeeper: %w (ZooKeeper needs Java: make deps)", err)
		}
		for _, p := range progs.Classpath {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("zookeeper: classpath entry %s: %w (install Debian's zookeeper: make deps)", p, err)
			}
		}
	}
	z := &Ensemble{}
	var l compose.Layout
	if s.On != nil {
		if l, err = compose.LayOutOn("ZooKeeper", s.On, 2888, 3888); err != nil {
			return nil, err
		}
	} else if l, err = env.LayOut(n, s.Netns, 2181, 2888, 3888); err != nil { // client, peer, election
		return nil, err
	}
	hosts := l.Hosts
	names := env.NewNames("zookeeper", n)
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
	specs := make([]compose.NodeSpec, n)
	for i, name := range names {
		specs[i] = compose.NodeSpec{Name: name}
		l.Place(&specs[i], i)
		dir := env.NodeDir(specs[i])
		client := l.Ports[i][0]
		args := append(append([]string(nil), jvm...),
			"-Djava.net.preferIPv4Stack=true",
			"-Dzookeeper.jmx.log4j.disable=true",
			"-Dlog4j.configuration=file:"+filepath.Join(dir, "log4j.properties"),
			"-cp", strings.Join(progs.Classpath, string(os.PathListSeparator)),
			"org.apache.zookeeper.server.quorum.QuorumPeerMain",
			filepath.Join(dir, "zoo.cfg"))
		cfg := zkConfig(dir, hosts[i], client, tick, s.Durability) + servers.String()
		log4j := "log4j.rootLogger=" + strings.ToUpper(level) + ", CONSOLE\n" +
			"log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n" +
			"log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n" +
			"log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n\n"
		myid := strconv.Itoa(i + 1)
		specs[i].Port, specs[i].Binary, specs[i].Args, specs[i].Clock = client, java, args, zkTime
		specs[i].Prepare =
			func(ctx context.Context, n *compose.Node) error {
				// Written before every start, so that a server restarted
				// without its data still knows who it is.
				return n.WriteFiles(ctx, map[string]string{"myid": myid + "\n", "zoo.cfg": cfg, "log4j.properties": log4j})
			}
		specs[i].Ready = func(ctx context.Context) error {
			_, err := zkMode(ctx, compose.HostAddr(hosts[i], client))
			return err
		}
		if l.Places != nil {
			specs[i].Binary = cmp.Or(l.Places[i].Binary, progs.Java)
		}
	}
	nodes, err := env.StartNodes(ctx, s, specs)
	if err != nil {
		return nil, err
	}
	z.Nodes = nodes
	if z.peers, err = env.NewPeers("ZooKeeper ensemble", l, nodes); err != nil {
		return nil, err
	}
	return z, nil
}

// zkConfig is a server's zoo.cfg without its server.N lines.
func zkConfig(dir, host string, client int, tick time.Duration, d compose.Durability) string {
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
	if d == compose.DurabilityFast {
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
func (z *Ensemble) Mode(ctx context.Context, n *compose.Node) (string, error) {
	mode, err := zkMode(ctx, n.ServerAddr())
	if err != nil {
		return "", fmt.Errorf("zookeeper: mode of %s: %w", n.Name, err)
	}
	return mode, nil
}

// Leader returns the server that leads the ensemble (the standalone
// server when there is one): of the servers that answer within a second
// and say they lead, the one of the highest epoch (a leader cut off from
// its followers says it leads until it notices, about syncLimit ticks).
// Servers that do not answer — killed, paused or electing — are skipped;
// it is an error if none leads.
func (z *Ensemble) Leader(ctx context.Context) (*compose.Node, error) {
	leader, err := compose.LeaderOf(ctx, z.Nodes, func(ctx context.Context, i int) (bool, uint64, error) {
		mode, zxid, err := zkStatus(ctx, z.Nodes[i].ServerAddr())
		return mode == "leader" || mode == "standalone", zxid >> 32, err
	})
	if err != nil {
		return nil, fmt.Errorf("zookeeper: no ZooKeeper leader: %w", err)
	}
	return leader, nil
}

// AwaitLeader waits until a server other than old (which may be nil)
// leads the ensemble and returns it: what a leader-kill fault waits for.
// ctx bounds the wait; without a deadline it is one minute.
func (z *Ensemble) AwaitLeader(ctx context.Context, old *compose.Node) (*compose.Node, error) {
	return compose.AwaitLeader(ctx, "ZooKeeper", z.Leader, old)
}

// zkTime writes /lockbench-clock through the server at addr and returns
// the znode's mtime: the wall clock of the leader, which stamps every
// transaction.
func zkTime(ctx context.Context, addr string) (time.Time, error) {
	c, events, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(NoLog{}))
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

// NoLog drops a go-zookeeper client's log: zk.WithLogger(NoLog{}) keeps a
// probe's or a test's client quiet.
type NoLog struct{}

// Printf drops its message.
func (NoLog) Printf(string, ...any) {}

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
func (z *Ensemble) Partition(groups ...[]*compose.Node) error { return z.peers.Partition(groups...) }

// HealPartition lifts the partition in force, if any (Peers.Heal).
func (z *Ensemble) HealPartition() error { return z.peers.Heal() }

// PartitionLeader cuts the current leader off from every other member
// (clients still reach it) and returns it: it can no longer commit
// anything, and the majority elects a new leader.
func (z *Ensemble) PartitionLeader(ctx context.Context) (*compose.Node, error) {
	return z.peers.PartitionLeader(ctx, z.Leader)
}

// AwaitServing waits until every running member serves clients again, as
// after HealPartition or Resume: ctx bounds the wait, and each member may
// take ReadyTimeout.
func (z *Ensemble) AwaitServing(ctx context.Context) error { return z.peers.AwaitServing(ctx) }

// Isolated returns nil when server n of the ensemble says it has lost its
// quorum (srvr: it is not serving requests, as a server cut off from a
// majority of the ensemble says within syncLimit ticks), and an error
// saying what it is otherwise: the proof that a partition between members
// took. The server must be reachable from this host (a partition between
// members does not cut its clients off).
func (z *Ensemble) Isolated(ctx context.Context, n *compose.Node) error {
	ctx, cancel := compose.WithDefaultTimeout(ctx, time.Second)
	defer cancel()
	out, err := fourLetterWord(ctx, n.ServerAddr(), "srvr")
	if err != nil {
		return fmt.Errorf("zookeeper: %s: %w", n.Name, err)
	}
	if strings.Contains(out, "not currently serving") {
		return nil
	}
	mode, _, err := zkStatus(ctx, n.ServerAddr())
	if err != nil {
		return fmt.Errorf("zookeeper: %s: %w", n.Name, err)
	}
	return fmt.Errorf("zookeeper: %s still serves, as %s", n.Name, mode)
}
