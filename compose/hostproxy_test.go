package compose_test

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/signal"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/kinds/redis"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// proxyMain is this test binary as `lockbench proxy` on a simulated host
// (see TestMain): the same compose.ProxyMain the lockbench binary runs.
func proxyMain(args []string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := compose.ProxyMain(ctx, args); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}

// uploadSelf puts this test binary on host r at bin, where it plays the
// lockbench binary (see TestMain).
func uploadSelf(t *testing.T, ctx context.Context, r remote.Remote, bin string) {
	t.Helper()
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if err := remote.Upload(ctx, r, self, bin, 0o755); err != nil {
		t.Fatal(err)
	}
}

// pingRTT is the shortest of five PING round trips to the Redis server
// at addr:port, measured on host r (bash's /dev/tcp on one connection):
// what a client there waits.
func pingRTT(t *testing.T, ctx context.Context, r remote.Remote, addr netip.Addr, port int) time.Duration {
	t.Helper()
	const script = `exec 3<>"/dev/tcp/$1/$2" || exit 1
for i in 1 2 3 4 5; do
	s=$(date +%s%N); printf 'PING\r\n' >&3; IFS= read -r l <&3; e=$(date +%s%N)
	case $l in +PONG*) echo $((e-s));; *) echo "bad reply: $l" >&2; exit 1;; esac
done`
	out, err := remote.Output(ctx, r, "bash", "-c", script, "bash", addr.String(), strconv.Itoa(port))
	if err != nil {
		t.Fatalf("PING from %s: %v", r.Name(), err)
	}
	best := time.Duration(-1)
	for _, f := range strings.Fields(string(out)) {
		ns, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("PING from %s: %q", r.Name(), out)
		}
		if d := time.Duration(ns); best < 0 || d < best {
			best = d
		}
	}
	return best
}

// TestPlacedProxy runs a Redis node on simulated host1 with a proxy
// beside it (lockbench proxy, here this test binary), its clients on
// host2: a latency fault added through the proxy's API, over the SSH
// connection, slows PING from host2 by at least the delay, and its
// removal ends that; the proxy reads back what is in force. A cut of the
// clients cuts the proxy's port as well as the server's, and the proof
// of a cut fails when the proxy's port is left open. A PostgreSQL server
// placed with a proxy answers host2 through it. Close leaves no process,
// no cut and no proxy file on either host.
func TestPlacedProxy(t *testing.T) {
	composetest.StartsServersWithin(t, 3*time.Minute)
	lab := remotetest.New(t, 2)
	ctx := composetest.Context(t)
	server, client := lab.Dial(t, 0, "root"), lab.Dial(t, 1, "root")
	const bin = "/tmp/lockbench/bin/lockbench"
	uploadSelf(t, ctx, server, bin)
	addr := lab.Hosts[0].Addr
	const port, proxyPort = 6379, 16379
	env := composetest.ForTest(t)
	nodes, err := redis.StartServers(ctx, env, compose.Spec{Nodes: 1, On: []compose.Placement{{
		Host: server, Addr: addr, Port: port, Dir: "/tmp/lockbench/redis", Lockbench: bin,
		Clients: []compose.Peer{{Host: client, Addr: lab.Hosts[1].Addr}},
		Proxy:   &compose.PlacedProxy{Port: proxyPort},
	}}}, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := nodes[0]
	x := n.Proxy()
	if x == nil {
		t.Fatal("a node placed with a Proxy has none")
	}
	if want := addr.String() + ":" + strconv.Itoa(proxyPort); n.Addr() != want || x.Port() != proxyPort {
		t.Fatalf("the node's address is %s (proxy port %d), want its proxy's, %s", n.Addr(), x.Port(), want)
	}

	before := pingRTT(t, ctx, client, addr, proxyPort)
	const delay = 300 * time.Millisecond
	if err := n.Delay(delay); err != nil {
		t.Fatal(err)
	}
	faults, err := x.Faults(ctx)
	if err != nil || !slices.Contains(faults, "delay: latency 300ms on downstream") {
		t.Fatalf("faults in force after Delay: %q (%v)", faults, err)
	}
	slowed := pingRTT(t, ctx, client, addr, proxyPort)
	direct := pingRTT(t, ctx, client, addr, port)
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	faults, err = x.Faults(ctx)
	if err != nil || len(faults) != 0 {
		t.Fatalf("faults in force after Heal: %q (%v)", faults, err)
	}
	after := pingRTT(t, ctx, client, addr, proxyPort)
	t.Logf("PING from %s through the proxy: %v before, %v under a %v delay (%v to the server itself), %v after the heal",
		lab.Hosts[1].Name, before, slowed, delay, direct, after)
	if slowed < delay {
		t.Errorf("PING through the delayed proxy took %v, under the delay of %v", slowed, delay)
	}
	if direct >= delay {
		t.Errorf("PING to the server itself took %v under the proxy's delay: the delay is not the proxy's", direct)
	}
	if after >= delay {
		t.Errorf("PING through the proxy took %v after the heal (delay %v)", after, delay)
	}

	// A cut of the clients cuts the proxy's port too, and is proven at
	// both ports.
	cutProven(t, ctx, n)
	// A cut that leaves the proxy's path open is no cut.
	if err := remote.CutPaths(ctx, server, remote.Path{Addr: lab.Hosts[1].Addr, SPort: port}); err != nil {
		t.Fatal(err)
	}
	if err := remote.CutPaths(ctx, client, remote.Path{Addr: addr, DPort: port}); err != nil {
		t.Fatal(err)
	}
	err = n.Unreachable(ctx, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(proxyPort)) {
		t.Errorf("a cut of the server's port only, its proxy's open: proven as %v, want an error naming port %d", err, proxyPort)
	}
	if err := remote.HealPaths(ctx, server); err != nil {
		t.Fatal(err)
	}
	if err := remote.HealPaths(ctx, client); err != nil {
		t.Fatal(err)
	}

	// PostgreSQL through its proxy, from the client host: the proxy
	// connects from the server's own host, which the server must trust.
	if pgBin, err := postgres.Binary(); err != nil {
		t.Logf("no PostgreSQL through a proxy: %v", err)
	} else {
		_, err := postgres.StartServer(ctx, env, compose.Spec{On: []compose.Placement{{
			Host: server, Addr: addr, Port: 5432, Dir: "/tmp/lockbench/postgres", Binary: pgBin, Lockbench: bin,
			Clients: []compose.Peer{{Host: client, Addr: lab.Hosts[1].Addr}},
			Proxy:   &compose.PlacedProxy{Port: 15432},
		}}}, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		err = client.Run(ctx, remote.Cmd{Path: path.Join(path.Dir(pgBin), "psql"), Env: []string{"PGCONNECT_TIMEOUT=30"}, Stdout: &out,
			Args: []string{"-h", addr.String(), "-p", "15432", "-U", postgres.DefaultPrograms().User, "-d", "postgres", "-Atc", "select 1"}})
		if err != nil || strings.TrimSpace(out.String()) != "1" {
			t.Errorf("select 1 from %s through the proxy: %q (%v)", lab.Hosts[1].Name, out.String(), err)
		}
	}

	pidfile, apiFile, log := compose.ProxyFiles("/tmp/lockbench/redis")
	if x.Pidfile() != pidfile {
		t.Errorf("the proxy's pidfile is %s, want %s", x.Pidfile(), pidfile)
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	for i, h := range []remote.Remote{server, client} {
		if left, err := remotetest.Leftovers(ctx, h); err != nil || len(left) > 0 {
			t.Errorf("%s: left %v (%v)", lab.Hosts[i].Name, left, err)
		}
	}
	for _, p := range []string{pidfile, apiFile, log} {
		if _, err := remote.Output(ctx, server, "test", "!", "-e", p); err != nil {
			t.Errorf("%s left on %s", p, lab.Hosts[0].Name)
		}
	}
}
