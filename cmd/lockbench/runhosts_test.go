package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/worker"
)

// staticLockbench returns a static lockbench binary for the hosts: the one
// make build made ($LOCKBENCH_BINARY), else one built here (this test
// binary is linked dynamically under -race).
func staticLockbench(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LOCKBENCH_BINARY"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p := filepath.Join(t.TempDir(), "lockbench")
	cmd := exec.Command("go", "build", "-o", p, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a static lockbench: %v\n%s", err, out)
	}
	return p
}

// labInventory writes an inventory of lab's four hosts: a Redis server on
// host1, a PostgreSQL server on host2, a Sentinel set's master on host1 and
// its replica on host2 (a sentinel beside each, host1's on a port of its
// choosing), clients on host3 and host4.
func labInventory(t *testing.T, lab *remotetest.Lab, pgBin string) string {
	t.Helper()
	return writeInventory(t, lab, fmt.Sprintf(`  - name: %s
    address: %s
    roles:
      servers:
        - {backend: redis, binary: /usr/bin/redis-server, data: /tmp/lockbench-data/redis, port: 6379}
        - {backend: sentinel, data: /tmp/lockbench-data/sentinel, port: 6380, sentinel_port: 26380}
  - name: %s
    address: %s
    roles:
      servers:
        - {backend: postgres, binary: %s, data: /tmp/lockbench-data/postgres, port: 5432}
        - {backend: sentinel, data: /tmp/lockbench-data/sentinel, port: 6380}
  - {name: %s, address: %s, roles: {clients: true}}
  - {name: %s, address: %s, roles: {clients: true}}
`, lab.Hosts[0].Name, lab.Hosts[0].Addr, lab.Hosts[1].Name, lab.Hosts[1].Addr, pgBin,
		lab.Hosts[2].Name, lab.Hosts[2].Addr, lab.Hosts[3].Name, lab.Hosts[3].Addr), workDir)
}

// workDir is the inventories' work_dir default: the hosts' directory
// for the run's workers, which nothingLeft checks.
const workDir = "work_dir: /tmp/lockbench-work"

// writeInventory writes an inventory of lab's hosts: hosts is the YAML
// of its host list, and its defaults are root, the lab's client key and
// known hosts, and the lines defaults (such as workDir). It returns the
// file's path.
func writeInventory(t *testing.T, lab *remotetest.Lab, hosts string, defaults ...string) string {
	t.Helper()
	doc := fmt.Sprintf("defaults:\n  user: root\n  identity_file: %s\n  known_hosts: %s\n", lab.KeyFile, lab.KnownHosts)
	for _, d := range defaults {
		doc += "  " + d + "\n"
	}
	doc += "hosts:\n" + hosts
	p := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// runOnLab runs lockbench run over the inventory inv, binary on the
// hosts, for every pair of backends × faults (both comma-separated), one
// injection each, 4 clients for 3s; it fails t unless the run succeeds,
// and returns the run's output directory, its output and its results.
func runOnLab(t *testing.T, inv, binary, backends, faults string) (string, []byte, *results.File) {
	t.Helper()
	dir := t.TempDir()
	run := start(t, "run", "--inventory", inv, "--binary", binary, "--backend", backends,
		"--fault", faults, "--injections", "1", "--clients", "4", "--duration", "3s",
		"--seed", "22", "--out", dir, "--no-report")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("run --inventory: %v\n%s", err, out)
	}
	f, err := results.Read(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, out, f
}

// checkCases fails t for a case of f that is invalid, did not inject or
// did not run 4 clients, and for a backend that granted nothing in any
// of its cases (one case alone may grant nothing: a restarted server on
// a busy machine): its clients on the hosts did not reach it.
func checkCases(t *testing.T, f *results.File) {
	t.Helper()
	granted := map[string]int64{}
	for _, c := range f.Cases {
		name := c.Backend + "/" + c.Fault
		t.Logf("%s: %d grants, %d injections, targets %+v", name, c.Acquired, c.Injections, c.Targets)
		granted[c.Backend] += c.Acquired
		if c.Invalid || c.Injections < 1 || c.Clients != 4 {
			t.Errorf("%s: invalid %v (%s), %d injections, %d clients: want a valid case that injected, with 4 clients",
				name, c.Invalid, c.InvalidReason, c.Injections, c.Clients)
		}
	}
	for b, n := range granted {
		if n == 0 {
			t.Errorf("%s granted nothing in any case: its clients on the hosts did not reach it", b)
		}
	}
}

// written is what a run wrote: its output out and every file under its
// output directory dir but the compressed ones.
func written(out []byte, dir string) []string {
	w := []string{string(out)}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".gz") {
			b, _ := os.ReadFile(p)
			w = append(w, string(b))
		}
		return nil
	})
	return w
}

// startLines starts run, killed when the test ends, and returns the
// lines of its output (stdout and stderr) as it writes them; the channel
// closes when its output does.
func startLines(t *testing.T, run *exec.Cmd) <-chan string {
	t.Helper()
	pipe, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	run.Stderr = run.Stdout
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = run.Process.Kill(); _ = run.Wait() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(pipe); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	return lines
}

// awaitWorker waits until a lockbench worker runs on client's host, and
// closes client. It fails when ctx ends first, or when ended (nil for
// never) is closed first: the run ended before its workers started.
func awaitWorker(ctx context.Context, client remote.Remote, ended <-chan struct{}) error {
	defer client.Close()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := remotetest.Processes(ctx, client)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(left, func(c string) bool { return strings.HasPrefix(c, "lockbench") }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no worker started on %s: %w", client.Name(), ctx.Err())
		case <-ended:
			return errors.New("the run ended before its workers started")
		case <-tick.C:
		}
	}
}

// nothingLeft fails t for whatever a run left on the lab's hosts: a
// process, a cut, its workers' or servers' files.
func nothingLeft(t *testing.T, ctx context.Context, lab *remotetest.Lab, when string) {
	t.Helper()
	for i, h := range lab.Hosts {
		r := lab.Dial(t, i, "root")
		if left, err := remotetest.Leftovers(ctx, r, "/tmp/lockbench-work/workers", "/tmp/lockbench-data/*"); err != nil || len(left) > 0 {
			t.Errorf("%s: %s still has %v (%v)", when, h.Name, left, err)
		}
		r.Close()
	}
}

// TestRunOnHosts runs lockbench run --inventory over four simulated hosts
// (Redis on host1, PostgreSQL on host2, clients on host3 and host4, the
// judge here) with a server pause, a partition, a restart and a power
// loss (the servers' dirs on lazy filesystems served on their hosts by the
// uploaded lockbench binary, each power loss proven by what it dropped
// and read back), then a Sentinel set across host1 and host2 with a
// partition and its failover (its replication held back by rules on
// host1 and host2, its master killed): every case
// runs its clients on both client hosts, every injection names the host
// it hit, the histories come back here, no key material reaches the
// outputs, and nothing is left on any host. A second run, interrupted
// (SIGINT) while its workers run, leaves nothing either.
func TestRunOnHosts(t *testing.T) {
	// About a minute on a 2-core machine loaded about 6×, 3 min 18 s
	// loaded about 13× (without power-loss); with power-loss, 5 min 8 s
	// loaded 25–30×.
	composetest.StartsServersWithin(t, 8*time.Minute)
	lab := remotetest.New(t, 4)
	pgBin, err := postgres.Binary()
	if err != nil {
		t.Skip(err)
	}
	binary := staticLockbench(t)
	inv := labInventory(t, lab, pgBin)
	ctx := composetest.Context(t)

	dir, out, f := runOnLab(t, inv, binary, "redis,postgres", "server-pause,partition,restart,power-loss")
	if len(f.Cases) != 8 {
		t.Fatalf("%d cases, want 8 (2 backends × 4 faults)\n%s", len(f.Cases), out)
	}
	sdir, sout, sf := runOnLab(t, inv, binary, "sentinel", "partition,failover,power-loss")
	if len(sf.Cases) != 3 {
		t.Fatalf("%d Sentinel cases, want 3\n%s", len(sf.Cases), sout)
	}
	// A Sentinel set's master is on host1 until a failover promotes its
	// replica on host2.
	serverHosts := map[string][]string{"redis": {lab.Hosts[0].Name}, "postgres": {lab.Hosts[1].Name}, "sentinel": {lab.Hosts[0].Name, lab.Hosts[1].Name}}
	checkCases(t, f) // a restarted PostgreSQL may grant nothing in a short case on a busy machine
	checkCases(t, sf)
	for _, c := range append(slices.Clone(f.Cases), sf.Cases...) {
		name := c.Backend + "/" + c.Fault
		runDir := dir
		if c.Backend == "sentinel" {
			runDir = sdir
		}
		// (The failover's promotion itself is compose's TestPlaced's to
		// prove: here, on a loaded machine, holding replication back over
		// SSH may outlast a 3 s case, which then says so.)
		for _, tg := range c.Targets {
			for _, h := range tg.Hosts {
				if !slices.Contains(serverHosts[c.Backend], h) {
					t.Errorf("%s: injection %d hit %v on hosts %v, want %v", name, tg.Injection, tg.Nodes, tg.Hosts, serverHosts[c.Backend])
				}
			}
			if len(tg.Hosts) == 0 {
				t.Errorf("%s: injection %d names no host", name, tg.Injection)
			}
			if c.Fault == "power-loss" && (!strings.Contains(tg.Effect, "unsynced bytes") || !strings.Contains(tg.Effect, "kept as they were")) {
				t.Errorf("%s: injection %d's effect %q: want what it dropped and what the server kept", name, tg.Injection, tg.Effect)
			}
		}
		both := slices.ContainsFunc(c.Notes, func(n string) bool {
			return strings.Contains(n, lab.Hosts[2].Name+" ran processes") && strings.Contains(n, lab.Hosts[3].Name+" ran processes")
		})
		if !both {
			t.Errorf("%s: the clients did not run on both client hosts: notes %q", name, c.Notes)
		}
		if _, err := os.Stat(filepath.Join(runDir, c.History)); err != nil {
			t.Errorf("%s: its history is not here: %v", name, err)
		}
	}
	// No secret in what the run wrote: the client key, the run token.
	key, err := os.ReadFile(lab.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{worker.TokenEnv + "="}
	for _, l := range strings.Split(string(key), "\n") {
		if len(l) > 40 && !strings.HasPrefix(l, "-----") {
			secrets = append(secrets, l)
		}
	}
	wrote := append(written(out, dir), written(sout, sdir)...)
	for _, s := range secrets {
		for _, w := range wrote {
			if strings.Contains(w, s) {
				t.Errorf("a secret (%.12s…) is in the run's output", s)
			}
		}
	}
	nothingLeft(t, ctx, lab, "after the run")

	// Ctrl-C while the workers run.
	dir2 := t.TempDir()
	run := start(t, "run", "--inventory", inv, "--binary", binary, "--backend", "redis", "--fault", "server-pause",
		"--clients", "2", "--duration", "30s", "--out", dir2, "--no-report")
	lines := startLines(t, run)
	if err := awaitWorker(ctx, lab.Dial(t, 2, "root"), nil); err != nil {
		t.Fatal(err) // no worker runs on host3
	}
	if err := run.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for l := range lines {
		seen = append(seen, l)
	}
	if err := run.Wait(); err != nil {
		t.Fatalf("run after SIGINT: %v\n%s", err, strings.Join(seen, "\n"))
	}
	if !slices.ContainsFunc(seen, func(l string) bool { return strings.Contains(l, "interrupted") }) {
		t.Errorf("the run did not say it was interrupted:\n%s", strings.Join(seen, "\n"))
	}
	nothingLeft(t, ctx, lab, "after SIGINT")
}

// quorumInventory writes an inventory of lab's four hosts: an etcd member
// and a ZooKeeper server on each of host1, host2 and host3 (etcd's
// binary left out: the run uploads its etcd-member), clients on host4.
func quorumInventory(t *testing.T, lab *remotetest.Lab) string {
	t.Helper()
	var doc string
	for _, h := range lab.Hosts[:3] {
		doc += fmt.Sprintf(`  - name: %s
    address: %s
    roles:
      servers:
        - {backend: etcd, data: /tmp/lockbench-data/etcd, port: 2379, peer_port: 2380}
        - {backend: zookeeper, data: /tmp/lockbench-data/zookeeper, port: 2181, peer_port: 2888, election_port: 3888}
`, h.Name, h.Addr)
	}
	doc += fmt.Sprintf("  - {name: %s, address: %s, roles: {clients: true}}\n", lab.Hosts[3].Name, lab.Hosts[3].Addr)
	return writeInventory(t, lab, doc, workDir)
}

// TestRunQuorumsOnHosts runs lockbench run --inventory with an etcd
// cluster and a ZooKeeper ensemble of three members each spread over
// three simulated hosts (one member of each per host), clients on a
// fourth and the judge here, under a leader partition (rules on the
// members' hosts) and a restart: every case is valid and injected, its
// clients ran on the client host, every injection names the member hosts
// it hit, and nothing is left on any host but the uploaded binaries.
func TestRunQuorumsOnHosts(t *testing.T) {
	composetest.StartsServersWithin(t, 4*time.Minute)
	lab := remotetest.New(t, 4)
	binary := staticLockbench(t)
	inv := quorumInventory(t, lab)
	ctx := composetest.Context(t)

	_, out, f := runOnLab(t, inv, binary, "etcd,zookeeper", "partition-leader,restart")
	if len(f.Cases) != 4 {
		t.Fatalf("%d cases, want 4 (2 backends × 2 faults)\n%s", len(f.Cases), out)
	}
	members := []string{lab.Hosts[0].Name, lab.Hosts[1].Name, lab.Hosts[2].Name}
	checkCases(t, f)
	for _, c := range f.Cases {
		name := c.Backend + "/" + c.Fault
		if len(c.Targets) == 0 {
			t.Errorf("%s: no injection names its target", name)
		}
		for _, tg := range c.Targets {
			if len(tg.Hosts) == 0 || slices.ContainsFunc(tg.Hosts, func(h string) bool { return !slices.Contains(members, h) }) {
				t.Errorf("%s: injection %d hit %v on hosts %v, want member hosts %v", name, tg.Injection, tg.Nodes, tg.Hosts, members)
			}
			// The partition's proof: the member says it lost its peers.
			if c.Fault == "partition-leader" && (!tg.Leader || !strings.Contains(tg.Effect, "lost its peers")) {
				t.Errorf("%s: injection %d: leader %v, effect %q: want the leader cut off, saying it lost its peers", name, tg.Injection, tg.Leader, tg.Effect)
			}
		}
		if !slices.ContainsFunc(c.Notes, func(n string) bool { return strings.Contains(n, lab.Hosts[3].Name+" ran processes") }) {
			t.Errorf("%s: the clients did not run on the client host: notes %q", name, c.Notes)
		}
	}
	nothingLeft(t, ctx, lab, "after the run")
}

// judgeInventory writes an inventory of lab's three hosts: a Redis server
// and the judge on host1, clients on host2 and host3.
func judgeInventory(t *testing.T, lab *remotetest.Lab) string {
	t.Helper()
	return writeInventory(t, lab, fmt.Sprintf(`  - name: %s
    address: %s
    roles:
      servers:
        - {backend: redis, binary: /usr/bin/redis-server, data: /tmp/lockbench-data/redis, port: 6379}
      judge: {port: 7070}
  - {name: %s, address: %s, roles: {clients: true}}
  - {name: %s, address: %s, roles: {clients: true}}
`, lab.Hosts[0].Name, lab.Hosts[0].Addr, lab.Hosts[1].Name, lab.Hosts[1].Addr,
		lab.Hosts[2].Name, lab.Hosts[2].Addr), workDir)
}

// TestRunWithTheJudgeOnAHost runs lockbench run --inventory with the
// judge where the inventory puts it: on host1, beside the Redis server,
// with clients on host2 and host3, and the nemesis here as the judge's
// peer over the wire. A server pause and a partition (the clients cut
// from the server's port, not from the judge on the same host), each
// struck while the judge's live view shows a section open, and a client
// pause (the judge asks the nemesis, here, to stop a worker on a client
// host) and latency (the proxy beside the server, on host1, its delay
// read back over SSH) inject and are proved; the judge's own results,
// brought back under judge/, record the injections the nemesis told it,
// naming the host each hit; the histories come back; no token reaches the outputs and
// nothing is left on any host, the judge included.
func TestRunWithTheJudgeOnAHost(t *testing.T) {
	composetest.StartsServersWithin(t, 4*time.Minute)
	lab := remotetest.New(t, 3)
	binary := staticLockbench(t)
	inv := judgeInventory(t, lab)
	ctx := composetest.Context(t)

	dir, out, f := runOnLab(t, inv, binary, "redis", "server-pause,partition,client-pause,latency")
	if want := "on " + lab.Hosts[0].Name + ", listening on " + lab.Hosts[0].Addr.String() + ":7070"; !strings.Contains(string(out), want) {
		t.Errorf("the run does not say its judge runs on host1 (%q):\n%s", want, out)
	}
	joined, err := results.Read(filepath.Join(dir, "judge", "results.json"))
	if err != nil {
		t.Fatalf("the judge's own results did not come back: %v", err)
	}
	if len(f.Cases) != 4 || len(joined.Cases) != 4 {
		t.Fatalf("%d cases, the judge recorded %d: want 4 (redis × 4 faults)\n%s", len(f.Cases), len(joined.Cases), out)
	}
	if f.RunID != joined.RunID {
		t.Errorf("run id %s here, %s on the judge", f.RunID, joined.RunID)
	}
	for i, c := range f.Cases {
		name := c.Backend + "/" + c.Fault
		t.Logf("%s: %d grants, %d injections, targets %+v", name, c.Acquired, c.Injections, c.Targets)
		if c.Invalid || c.Injections < 1 || c.Acquired == 0 {
			t.Errorf("%s: invalid %v (%s), %d injections, %d grants: want a valid case that injected and granted",
				name, c.Invalid, c.InvalidReason, c.Injections, c.Acquired)
		}
		want := []string{lab.Hosts[0].Name} // the server's host
		j := joined.Cases[i]
		if j.Fault != c.Fault || len(j.Targets) != len(c.Targets) || j.Injections != c.Injections {
			t.Errorf("%s: the judge recorded %s with %d targets, %d injections; here %d, %d", name, j.Fault, len(j.Targets), j.Injections, len(c.Targets), c.Injections)
		}
		for k, tg := range c.Targets {
			hit := tg.Hosts
			if c.Fault == "client-pause" && len(hit) == 1 && (hit[0] == lab.Hosts[1].Name || hit[0] == lab.Hosts[2].Name) {
				hit = want // a worker on a client host
			}
			if !slices.Equal(hit, want) {
				t.Errorf("%s: injection %d hit %v on hosts %v, want %v (a client host for client-pause)", name, tg.Injection, tg.Nodes, tg.Hosts, want)
			}
			if k < len(j.Targets) && !slices.Equal(j.Targets[k].Hosts, tg.Hosts) {
				t.Errorf("%s: the judge records injection %d on %v, here on %v", name, tg.Injection, j.Targets[k].Hosts, tg.Hosts)
			}
			// The delay is read back from the proxy beside the server, on
			// its host, through its API over SSH.
			if c.Fault == "latency" && (tg.Tested == nil || !*tg.Tested || !strings.Contains(tg.Effect, "delay: latency 50ms")) {
				t.Errorf("%s: injection %d: tested %v (%s), effect %q: want a tested delay read back from the proxy", name, tg.Injection, tg.Tested, tg.WhyNot, tg.Effect)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, c.History)); err != nil {
			t.Errorf("%s: its history did not come back: %v", name, err)
		}
	}
	for _, w := range written(out, dir) {
		if strings.Contains(w, worker.TokenEnv+"=") || strings.Contains(w, "--token ") {
			t.Error("the run token is in the run's output")
		}
	}
	nothingLeft(t, ctx, lab, "after the run")
}
