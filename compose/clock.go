package compose

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// clockSource is the clock preload's C source: see preload/clock.c for
// what it moves and what it cannot.
//
//go:embed preload/clock.c
var clockSource []byte

// CC is the C compiler that builds the clock preload.
var CC = "gcc"

// clockPreload is the clock preload built once per process, in a sealed
// memfd: servers load it through the descriptor they inherit
// (LD_PRELOAD=/proc/self/fd/N), so no file needs to be readable by the
// user a server runs as, and none is left behind.
var clockPreload = sync.OnceValues(buildClockPreload)

func buildClockPreload() (*os.File, error) {
	cc, err := exec.LookPath(CC)
	if err != nil {
		return nil, fmt.Errorf("compose: FakeClock builds its preload with a C compiler: %w (Debian's gcc)", err)
	}
	dir, err := os.MkdirTemp("", "lockbench-clock-")
	if err != nil {
		return nil, fmt.Errorf("compose: clock preload: %w", err)
	}
	defer os.RemoveAll(dir)
	src, so := filepath.Join(dir, "clock.c"), filepath.Join(dir, "clock.so")
	if err := os.WriteFile(src, clockSource, 0o644); err != nil {
		return nil, fmt.Errorf("compose: clock preload: %w", err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", so, src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("compose: build the clock preload: %s: %w\n%s", cc, err, out)
	}
	lib, err := os.ReadFile(so)
	if err != nil {
		return nil, fmt.Errorf("compose: clock preload: %w", err)
	}
	f, err := memfd("lockbench-clock-preload.so", unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(lib); err != nil {
		f.Close()
		return nil, fmt.Errorf("compose: clock preload: %w", err)
	}
	seals := unix.F_SEAL_WRITE | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("compose: seal the clock preload: %w", err)
	}
	return f, nil
}

// memfd creates a memory file; MFD_EXEC, unknown to kernels before 6.3
// (whose memfds are all executable), is dropped where refused.
func memfd(name string, flags int) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|flags)
	if errors.Is(err, unix.EINVAL) && flags&unix.MFD_EXEC != 0 {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|flags&^unix.MFD_EXEC)
	}
	if err != nil {
		return nil, fmt.Errorf("compose: memfd_create %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), name), nil
}

// clockPage mirrors struct page of preload/clock.c.
type clockPage struct {
	seq        uint64
	anchorReal int64
	anchorFake int64
	rate       uint64 // math.Float64bits
}

// A nodeClock is the fake wall clock of one node: a page the node's
// processes map read-only, which it writes. It outlives restarts of the
// server, as a machine's clock outlives its processes.
type nodeClock struct {
	mu   sync.Mutex
	f    *os.File
	mem  []byte
	page *clockPage
	// The clock reads anchorFake at real time anchorReal and runs at rate.
	anchorReal, anchorFake int64
	rate                   float64
}

func newNodeClock() (*nodeClock, error) {
	if _, err := clockPreload(); err != nil {
		return nil, err
	}
	f, err := memfd("lockbench-clock", 0)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(4096); err != nil {
		f.Close()
		return nil, fmt.Errorf("compose: clock page: %w", err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("compose: map the clock page: %w", err)
	}
	c := &nodeClock{f: f, mem: mem, page: (*clockPage)(unsafe.Pointer(&mem[0])), rate: 1}
	c.publish()
	return c, nil
}

// prepare makes cmd load the preload and map the clock's page.
func (c *nodeClock) prepare(cmd *exec.Cmd) error {
	so, err := clockPreload()
	if err != nil {
		return err
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, so, c.f)
	cmd.Env = append(cmd.Env,
		"LD_PRELOAD=/proc/self/fd/"+strconv.Itoa(fd),
		"LOCKBENCH_CLOCK_FD="+strconv.Itoa(fd+1))
	return nil
}

// publish writes the anchors and the rate to the page under the sequence
// lock that the preload's readers retry on. Callers hold mu (or own c).
func (c *nodeClock) publish() {
	p := c.page
	atomic.AddUint64(&p.seq, 1)
	atomic.StoreInt64(&p.anchorReal, c.anchorReal)
	atomic.StoreInt64(&p.anchorFake, c.anchorFake)
	atomic.StoreUint64(&p.rate, math.Float64bits(c.rate))
	atomic.AddUint64(&p.seq, 1)
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
// rate from now on.
func (c *nodeClock) set(jump time.Duration, rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	c.anchorFake, c.anchorReal, c.rate = c.at(now)+int64(jump), now, rate
	c.publish()
}

// reset sets the clock back to real time at real speed.
func (c *nodeClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UnixNano()
	c.anchorFake, c.anchorReal, c.rate = now, now, 1
	c.publish()
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

func (c *nodeClock) close() error {
	return errors.Join(unix.Munmap(c.mem), c.f.Close())
}

// errNoClock is the error of a clock control on a node without FakeClock.
func (n *Node) errNoClock() error {
	return fmt.Errorf("compose: %s runs without FakeClock: its clock cannot be moved (a Go server such as an etcd member cannot have one: Go reads the clock from the vDSO, which no preload reaches)", n.Name)
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
	n.clock.set(d, n.clock.currentRate())
	return nil
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
	n.clock.set(0, rate)
	return nil
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
	n.clock.reset()
	return nil
}

// ServerTime reads the server's wall clock, as the server itself reads
// it: what proves a clock fault took. Redis answers TIME; PostgreSQL
// clock_timestamp(); ZooKeeper has no such command, so ServerTime writes a
// znode (/lockbench-clock) and returns its mtime, which the ensemble's
// leader stamps with its own clock — a ZooKeeper member's wall clock is
// read only when it leads, and only to stamp znodes. A server kind without
// one (an etcd member) is an error.
func (n *Node) ServerTime(ctx context.Context) (time.Time, error) {
	if n.spec.clock == nil {
		return time.Time{}, fmt.Errorf("compose: %s: no way to read its server's clock", n.Name)
	}
	t, err := n.spec.clock(ctx, n.ServerAddr())
	if err != nil {
		return time.Time{}, fmt.Errorf("compose: read the clock of %s: %w", n.Name, err)
	}
	return t, nil
}
