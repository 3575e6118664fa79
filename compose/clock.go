package compose

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"path"
	"sync"
	"time"

	"github.com/lockbench/lockbench/remote"
)

// clockSource is the clock preload's C source: see preload/clock.c for
// what it moves and what it cannot.
//
//go:embed preload/clock.c
var clockSource []byte

// The clock preload is built once per host of an Env, from the source
// uploaded there, into the Env's dir on that host (a host placed by the
// caller may name a prebuilt one instead: Placement.ClockPreload); each
// node under it gets a copy in its clock dir, beside its dir, which
// its server's user can read, with the page its clock is read from.

// clockPreloadOn returns the path of the clock preload on n's host,
// building it there on first use.
func (e *Env) clockPreloadOn(ctx context.Context, n *Node) (string, error) {
	if p := n.spec.place; p != nil && p.ClockPreload != "" {
		return p.ClockPreload, nil
	}
	e.preloadMu.Lock()
	defer e.preloadMu.Unlock() // one build per host, once
	if e.preloads == nil {
		e.preloads = map[string]string{}
	}
	key := n.host.Name()
	if so, ok := e.preloads[key]; ok {
		return so, nil
	}
	dir := path.Join(path.Dir(n.Dir), ".lockbench-clock-preload")
	if p := n.spec.place; p != nil {
		dir = p.Dir + ".clock-preload"
	}
	src, so := path.Join(dir, "clock.c"), path.Join(dir, "clock.so")
	if err := remote.Upload(ctx, n.host, bytes.NewReader(clockSource), src, 0o644); err != nil {
		return "", fmt.Errorf("compose: clock preload: %w", err)
	}
	var out bytes.Buffer
	err := n.host.Run(ctx, remote.Cmd{Path: e.Programs.CC, Args: []string{"-shared", "-fPIC", "-O2", "-o", so, src}, Stdout: &out,
		Stderr: &out})
	if err != nil {
		return "", fmt.Errorf("compose: build the clock preload on %s with %s (Debian's gcc, or a prebuilt one): "+
			"%w", n.host.Name(), e.Programs.CC, err)
	}
	e.preloads[key] = so
	e.mu.Lock()
	e.extraDirs = append(e.extraDirs, hostDir{n.host, dir})
	e.mu.Unlock()
	return so, nil
}

// A nodeClock is the fake wall clock of one node: a page on its host that
// the node's processes map read-only, which a control rewrites through
// the host's Remote. It outlives restarts of the server, as a machine's
// clock outlives its processes.
type nodeClock struct {
	host     remote.Remote
	dir      string // the node's clock dir on its host
	so, page string // the preload and the page, in it
	prebuilt bool   // so is the caller's, elsewhere
	mu       sync.Mutex
	seq      uint64
	// The clock reads anchorFake at real time anchorReal and runs at rate.
	anchorReal, anchorFake int64
	rate                   float64
}

// newNodeClock makes n's clock: the preload and a page that reads real
// time, in n's clock dir on its host.
func (e *Env) newNodeClock(ctx context.Context, n *Node) (*nodeClock, error) {
	so, err := e.clockPreloadOn(ctx, n)
	if err != nil {
		return nil, err
	}
	c := &nodeClock{host: n.host, dir: clockDir(n), rate: 1}
	c.page = path.Join(c.dir, "page")
	c.so = path.Join(c.dir, "clock.so")
	if p := n.spec.place; p != nil && p.ClockPreload != "" {
		c.so, c.prebuilt = so, true
	}
	// The dir and its files are open to every user: the server may run
	// as one (PostgreSQL).
	err = n.host.Run(ctx, remote.Cmd{Path: "sh", Args: []string{"-c", `set -e
mkdir -p -- "$1" && chmod 755 "$1"
[ "$2" = "$3" ] || { cp -- "$2" "$3" && chmod 644 "$3"; }
: > "$4" && chmod 644 "$4"`, "sh", c.dir, so, c.so, c.page}})
	if err != nil {
		return nil, fmt.Errorf("compose: clock of %s: %w", n.Name, err)
	}
	if err := c.publish(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// clockDir is n's clock dir on its host: beside its dir, so that a wipe
// leaves it.
func clockDir(n *Node) string { return n.Dir + ".clock" }

// env is what makes a server load the preload and read the page.
func (c *nodeClock) env() []string {
	return []string{"LD_PRELOAD=" + c.so, "LOCKBENCH_CLOCK_FILE=" + c.page}
}

// pageCheck mirrors page_check of preload/clock.c.
func pageCheck(w ...uint64) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, x := range w {
		h ^= x
		h *= 0x100000001b3
	}
	return h
}

// publish writes the anchors and the rate to the page, whole, with one
// write (dd) on its host: a reader that meets it half written finds its
// check wrong and reads again. Callers hold mu (or own c).
func (c *nodeClock) publish(ctx context.Context) error {
	c.seq++
	rate := math.Float64bits(c.rate)
	w := []uint64{c.seq, uint64(c.anchorReal), uint64(c.anchorFake), rate}
	page := make([]byte, 0, 40)
	for _, x := range append(w, pageCheck(w...)) {
		page = binary.LittleEndian.AppendUint64(page, x)
	}
	err := c.host.Run(ctx, remote.Cmd{
		Path:  "dd",
		Args:  []string{"of=" + c.page, "bs=40", "count=1", "iflag=fullblock", "conv=notrunc", "status=none"},
		Stdin: bytes.NewReader(page),
	})
	if err != nil {
		return fmt.Errorf("compose: write the clock page %s on %s: %w", c.page, c.host.Name(), err)
	}
	return nil
}

// at is the clock's reading at real time real (ns), computed as the
// preload computes it. Callers hold mu.
func (c *nodeClock) at(real int64) int64 {
	if c.rate == 1 {
		return real + (c.anchorFake - c.anchorReal)
	}
	return c.anchorFake + int64(float64(real-c.anchorReal)*c.rate)
}

// set re-anchors the clock now, reading what it read plus jump, running at
// rate from now on. The anchors are read on this machine's clock: on
// another host, a jump (rate 1) is exact whatever their clocks differ by,
// and a rate is off by that difference times the rate's distance from 1.
func (c *nodeClock) set(jump time.Duration, rate float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	now := time.Now().UnixNano()
	c.anchorFake, c.anchorReal, c.rate = c.at(now)+int64(jump), now, rate
	return c.publish(ctx)
}

// reset sets the clock back to real time at real speed.
func (c *nodeClock) reset() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	now := time.Now().UnixNano()
	c.anchorFake, c.anchorReal, c.rate = now, now, 1
	return c.publish(ctx)
}

func (c *nodeClock) offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	return time.Duration(c.at(now) - now)
}

func (c *nodeClock) currentRate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}

// errNoClock is the error of a clock control on a node without FakeClock.
func (n *Node) errNoClock() error {
	return fmt.Errorf("compose: %s runs without FakeClock: its clock cannot be moved (a Go server such as an etcd member cannot have one: "+
		"Go reads the clock from the vDSO, which no preload reaches)", n.Name)
}

// JumpClock steps the node's wall clock by d, forward when d > 0, as
// settimeofday or an NTP step does: every process of the server reads the
// wall clock d further on (CLOCK_REALTIME and its variants, gettimeofday,
// time) from the moment JumpClock returns, and goes on from there. Its
// monotonic clocks, which no step moves, and its timers are unchanged.
// Jumps add up, and survive restarts of the server.
//
// What it does to a server is the server's business: Redis expires keys by
// the wall clock, so a jump forward by more than a key's TTL expires it at
// once; PostgreSQL's now() moves; ZooKeeper stamps znodes (ctime, mtime)
// with the wall clock but times sessions with the monotonic one. The node
// must have been started with FakeClock.
func (n *Node) JumpClock(d time.Duration) error {
	if n.clock == nil {
		return n.errNoClock()
	}
	return n.clock.set(d, n.clock.currentRate())
}

// SetClockRate makes the node's wall clock run at rate times real time
// from now on (2 runs twice as fast; 1 is real speed), continuing from
// what it reads now, as a machine whose clock drifts. Only the wall clock
// is scaled: the server's monotonic clocks and its timers keep real time,
// which the preload cannot change without breaking the server's own
// waits (see preload/clock.c), so a lock whose expiry a server measures on
// its monotonic clock (ZooKeeper's sessions) is not reached. The node must
// have been started with FakeClock.
func (n *Node) SetClockRate(rate float64) error {
	if n.clock == nil {
		return n.errNoClock()
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return fmt.Errorf("compose: clock rate %v of %s: want a positive finite number", rate, n.Name)
	}
	return n.clock.set(0, rate)
}

// ClockOffset returns how far the node's wall clock is ahead of the real
// one now (behind when negative); 0 for a node without FakeClock.
func (n *Node) ClockOffset() time.Duration {
	if n.clock == nil {
		return 0
	}
	return n.clock.offset()
}

// ResetClock sets the node's wall clock back to real time at real speed.
func (n *Node) ResetClock() error {
	if n.clock == nil {
		return n.errNoClock()
	}
	return n.clock.reset()
}

// ServerTime reads the server's wall clock, as the server itself reads
// it: what proves a clock fault took. Redis answers TIME; PostgreSQL
// clock_timestamp(); ZooKeeper has no such command, so ServerTime writes a
// znode (/lockbench-clock) and returns its mtime, which the ensemble's
// leader stamps with its own clock — a ZooKeeper member's wall clock is
// read only when it leads, and only to stamp znodes. A server kind without
// one (an etcd member) is an error.
func (n *Node) ServerTime(ctx context.Context) (time.Time, error) {
	if n.spec.Clock == nil {
		return time.Time{}, fmt.Errorf("compose: %s: no way to read its server's clock", n.Name)
	}
	t, err := n.spec.Clock(ctx, n.ServerAddr())
	if err != nil {
		return time.Time{}, fmt.Errorf("compose: read the clock of %s: %w", n.Name, err)
	}
	return t, nil
}
