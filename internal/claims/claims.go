// Package claims keeps concurrent lockbench processes on one machine out
// of each other's way: a listening port, or a slot of 198.18.0.0/15 (a
// /24 for a network of namespaces), is claimed by an OFD lock on one byte
// of a file that every lockbench process shares. The kernel drops a
// process's locks when it dies, however it dies, so a claim never
// outlives its holder and needs no cleanup.
//
// compose claims the ports of its servers and the slots of its peer
// networks from the bottom of the range; remotetest claims the slots of
// its simulated hosts from the top (LabSlots of them). A slot's byte is
// the same whoever claims it, so the two never share a slot even where
// their ranges meet.
package claims

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

const (
	// Slots is how many /24 networks 198.18.0.0/15 holds.
	Slots = 512
	// LabSlots is how many slots, from the top, simulated hosts may take.
	LabSlots = 64
	// slotBase is the byte of slot 0, far above every port's.
	slotBase = 1 << 20
)

var (
	once    sync.Once
	file    *os.File
	openErr error
)

// Path is the claims file every lockbench process on this machine shares.
func Path() string { return filepath.Join(os.TempDir(), "lockbench-ports.lock") }

// Open opens the claims file once per process, and says why it cannot.
// The other functions call it; without the file, nothing can be claimed.
func Open() error {
	once.Do(func() {
		file, openErr = os.OpenFile(Path(), os.O_CREATE|os.O_RDWR, 0o666)
		if openErr != nil {
			openErr = fmt.Errorf("claims: the file that keeps concurrent lockbench processes apart: %w", openErr)
		}
	})
	return openErr
}

// Port claims port p for this process, unless another process holds it
// (false) or the claims file cannot be opened (an error).
func Port(p int) (bool, error) {
	if p < 1 || p > 65535 {
		return false, fmt.Errorf("claims: port %d: want 1 to 65535", p)
	}
	return take(p)
}

// Slot claims slot s of 198.18.0.0/15 for this process, unless another
// process holds it (false) or the claims file cannot be opened.
func Slot(s int) (bool, error) {
	if s < 0 || s >= Slots {
		return false, fmt.Errorf("claims: slot %d: want 0 to %d", s, Slots-1)
	}
	return take(slotBase + s)
}

// ReleaseSlot gives up slot s.
func ReleaseSlot(s int) { release(slotBase + s) }

// Prefix is slot s's /24: 198.18.0.0/24 for slot 0, 198.19.255.0/24 for
// the last.
func Prefix(s int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18 + byte(s>>8), byte(s), 0}), 24)
}

// Addr is address last of slot s's /24.
func Addr(s int, last byte) netip.Addr {
	a := Prefix(s).Addr().As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

func take(off int) (bool, error) {
	if err := Open(); err != nil {
		return false, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(off), Len: 1}
	return unix.FcntlFlock(file.Fd(), unix.F_OFD_SETLK, &lk) == nil, nil
}

func release(off int) {
	if Open() != nil {
		return
	}
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: int64(off), Len: 1}
	_ = unix.FcntlFlock(file.Fd(), unix.F_OFD_SETLK, &lk)
}
