package compose

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// needPeerNetwork skips the test, saying why, under -short (it builds
// network namespaces and servers in them; composetest.StartsServers
// decides this for every other test, but compose's own tests cannot
// import it) and where PeerNetwork cannot work (not root, no netns, no ip
// command).
func needPeerNetwork(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds network namespaces: skipped under -short (make unit); make test runs it")
	}
	if err := PeerNetworkAvailable(); err != nil {
		t.Skip(err)
	}
}

// partitionRules lists the partition rules in p's router.
func partitionRules(t *testing.T, p *peerNet) []string {
	t.Helper()
	bin, err := ipBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(bin, "rule", "show", "pref", strconv.Itoa(partitionPref))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := p.router.do(cmd.Start); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ip rule show: %v: %s", err, out.Bytes())
	}
	var rules []string
	for l := range strings.Lines(out.String()) {
		if l = strings.TrimSpace(l); l != "" {
			rules = append(rules, l)
		}
	}
	return rules
}

// echoServer listens on addr inside ns and echoes every connection until
// the test ends.
func echoServer(t *testing.T, ns *netns, addr string) {
	t.Helper()
	var l net.Listener
	if err := ns.do(func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, c) })
		}
	})
}

// dial connects to addr from inside ns (nil: the host), giving up after d.
func dial(ns *netns, addr string, d time.Duration) (net.Conn, error) {
	dialer := net.Dialer{Timeout: d}
	if ns == nil {
		return dialer.Dial("tcp", addr)
	}
	var c net.Conn
	err := ns.do(func() (err error) { c, err = dialer.Dial("tcp", addr); return err })
	return c, err
}

// echoes reports whether a round trip over c completes within d.
func echoes(c net.Conn, d time.Duration) error {
	if err := c.SetDeadline(time.Now().Add(d)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("echo %q, want ping", buf)
	}
	return nil
}

// isTimeout reports whether err is a timeout, what a silent drop gives,
// rather than a refusal or an unreachable host.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestPeerNetPartition checks the network itself, with sockets of this
// process inside the member namespaces: members reach each other and the
// host reaches them; a partition drops the traffic between the groups
// silently (a dial times out, a connection stalls) in both directions,
// leaves a group's members and the host's access alone, and heals.
func TestPeerNetPartition(t *testing.T) {
	needPeerNetwork(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // first registered, so it runs last
	forward, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPeerNet(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	})
	if after, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward"); !bytes.Equal(after, forward) {
		t.Errorf("host ip_forward %q became %q: forwarding belongs in the router only", forward, after)
	}
	addrs := make([]string, 3)
	for i, m := range p.members {
		addrs[i] = net.JoinHostPort(p.addr(i).String(), "7000")
		echoServer(t, m, addrs[i])
	}
	nodes := []*Node{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}}

	// reach checks, for every ordered pair of members and from the host
	// to each member, whether a connection is made and echoes.
	reach := func(t *testing.T, cut map[[2]int]bool) {
		t.Helper()
		for from := -1; from < 3; from++ { // -1: the host
			var ns *netns
			if from >= 0 {
				ns = p.members[from]
			}
			for to := range 3 {
				if from == to {
					continue
				}
				// A cut must hold for a while; a connection, on a
				// loaded machine, may take a while.
				want := cut[[2]int{from, to}]
				d := 5 * time.Second
				if want {
					d = 400 * time.Millisecond
				}
				c, err := dial(ns, addrs[to], d)
				if err == nil {
					err = echoes(c, d)
					c.Close()
				}
				switch {
				case want && err == nil:
					t.Errorf("%d -> %d: connected across the partition", from, to)
				case want && !isTimeout(err):
					t.Errorf("%d -> %d: %v; want a timeout (silent drop)", from, to, err)
				case !want && err != nil:
					t.Errorf("%d -> %d: %v; want a connection", from, to, err)
				}
			}
		}
	}
	reach(t, nil)

	// A connection made before the partition stalls, and carries on
	// after it heals (TCP retransmits what was lost).
	old, err := dial(p.members[1], addrs[0], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()

	if err := p.partition(nodes, [][]*Node{{nodes[0]}}); err != nil {
		t.Fatal(err)
	}
	reach(t, map[[2]int]bool{{0, 1}: true, {1, 0}: true, {0, 2}: true, {2, 0}: true})
	if rules := partitionRules(t, p); len(rules) != 4 {
		t.Errorf("router rules %q: want 4, one per direction of the 2 pairs cut", rules)
	}
	if err := echoes(old, 500*time.Millisecond); !isTimeout(err) {
		t.Fatalf("old connection across the partition: %v; want a timeout", err)
	}

	// Another partition replaces it: now m2 alone.
	if err := p.partition(nodes, [][]*Node{{nodes[2]}}); err != nil {
		t.Fatal(err)
	}
	reach(t, map[[2]int]bool{{2, 0}: true, {0, 2}: true, {2, 1}: true, {1, 2}: true})
	if rules := partitionRules(t, p); len(rules) != 4 {
		t.Errorf("router rules %q: want the 4 of the new partition only", rules)
	}

	if err := p.heal(); err != nil {
		t.Fatal(err)
	}
	if rules := partitionRules(t, p); len(rules) != 0 {
		t.Errorf("router rules %q after heal: want none", rules)
	}
	reach(t, nil)
	// The stalled write is still queued; the echo of it and of a new one
	// arrive once the retransmission gets through.
	if err := old.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := io.ReadFull(old, buf); err != nil || string(buf) != "pingping" {
		t.Fatalf("old connection after heal: %q, %v; want both pings echoed", buf, err)
	}
	if err := p.heal(); err != nil {
		t.Fatalf("heal without a partition: %v", err)
	}
}

func TestPeerNetPartitionBadGroups(t *testing.T) {
	needPeerNetwork(t)
	p, err := newPeerNet(3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	a, b, c := &Node{Name: "a"}, &Node{Name: "b"}, &Node{Name: "c"}
	nodes := []*Node{a, b, c}
	for _, tc := range []struct {
		name   string
		groups [][]*Node
		want   string
	}{
		{"none", nil, "nothing would be cut"},
		{"all in one", [][]*Node{{a, b, c}}, "nothing would be cut"},
		{"stranger", [][]*Node{{a}, {&Node{Name: "x"}}}, "x is not a member"},
		{"twice", [][]*Node{{a}, {b, a}}, "a is in two groups"},
		{"nil", [][]*Node{{nil}}, "nil node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.partition(nodes, tc.groups); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("partition %v: %v; want an error saying %q", tc.groups, err, tc.want)
			}
		})
	}
	if rules := partitionRules(t, p); len(rules) != 0 {
		t.Fatalf("rejected partitions left rules %q", rules)
	}
}

// NetnsHolders lists what keeps the network namespace with inode ino
// alive: a thread in it, a descriptor of it, a mount of it. (Exported for
// the package's external tests.)
func NetnsHolders(ino uint64) ([]string, error) {
	want := fmt.Sprintf("net:[%d]", ino)
	var held []string
	for _, pattern := range []string{"/proc/[0-9]*/task/[0-9]*/ns/net", "/proc/[0-9]*/fd/*"} {
		paths, err := filepath.Glob(pattern)
		if err != nil {
			return nil, err
		}
		for _, path := range paths {
			if l, err := os.Readlink(path); err == nil && l == want {
				held = append(held, path)
			}
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(mounts)) {
		if strings.Contains(line, want) {
			held = append(held, "mount: "+strings.TrimSpace(line))
		}
	}
	return held, nil
}

// TestPeerNetClose checks that close leaves nothing: the host link is
// gone, and nothing holds the namespaces, so the kernel has freed them.
func TestPeerNetClose(t *testing.T) {
	needPeerNetwork(t)
	p, err := newPeerNet(2)
	if err != nil {
		t.Fatal(err)
	}
	link, err := net.InterfaceByName(p.link())
	if err != nil {
		t.Fatalf("host link of a live network: %v", err)
	}
	var inodes []uint64
	for _, ns := range append([]*netns{p.router}, p.members...) {
		ino, err := ns.inode()
		if err != nil {
			t.Fatal(err)
		}
		inodes = append(inodes, ino)
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	if l, err := net.InterfaceByIndex(link.Index); err == nil {
		t.Errorf("host link %s (index %d) left after close", l.Name, link.Index)
	}
	for _, ino := range inodes {
		held, err := NetnsHolders(ino)
		if err != nil {
			t.Fatal(err)
		}
		if len(held) > 0 {
			t.Errorf("namespace %d still held after close: %v", ino, held)
		}
	}
	if err := p.heal(); err == nil {
		t.Error("heal after close succeeded")
	}
}

// TestSweepPeerNets plants the host link a dead run would leave (its slot
// claimed by nobody) and checks that the next network removes it.
func TestSweepPeerNets(t *testing.T) {
	needPeerNetwork(t)
	const slot = peerSlots - 1 // the last one claimPeerSlot would hand out
	claimsOnce.Do(openClaims)
	if claims == nil {
		t.Skip(claimsErr)
	}
	peerSlotsMu.Lock()
	free := !peerSlotsIn[slot] && lockByte(peerClaimBase+slot)
	if free {
		unlockByte(peerClaimBase + slot)
	}
	peerSlotsMu.Unlock()
	if !free {
		t.Skipf("slot %d is in use", slot)
	}
	name := peerLinkPrefix + strconv.Itoa(slot)
	if err := ip(nil, []string{"link add " + name + " type veth peer name lbstale" + strconv.Itoa(slot)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteLink(name) })

	p, err := newPeerNet(1) // the next network sweeps first
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if p.slot != slot {
		if _, err := net.InterfaceByName(name); err == nil {
			t.Fatalf("stale %s left by the next network", name)
		}
	}
	if _, err := net.InterfaceByName("lbstale" + strconv.Itoa(slot)); err == nil {
		t.Fatalf("the stale link's peer lbstale%d left", slot)
	}
}
