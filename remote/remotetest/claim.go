package remotetest

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/lockbench/lockbench/remote"
)

// A lab's addresses are one /24 of 198.18.0.0/15 (RFC 2544's range for
// benchmark networks), claimed the way compose claims its peer networks'
// (compose/peernet.go): an OFD lock on byte claimBase+slot of the claims
// file every lockbench test process shares, which the kernel drops when
// the process dies, however it dies. Labs take slots from the top of the
// 512 down (198.19.255.0/24 first), compose's peer networks from the
// bottom up; the byte is the same for a slot, so the two never share one
// even where their ranges meet.
const (
	// claimBase and slots are compose's peerClaimBase and peerSlots.
	claimBase = 1 << 20
	slots     = 512
	// labSlots is how many slots, from the top, labs may take.
	labSlots = 64
	// linkPrefix names the control node's end of a lab's uplink:
	// lbhosts<slot>.
	linkPrefix = "lbhosts"
)

var (
	claimsMu   sync.Mutex
	claimsFile *os.File
	held       = map[int]bool{} // slots this process holds
)

// claimsPath is compose's claims file.
func claimsPath() string { return filepath.Join(os.TempDir(), "lockbench-ports.lock") }

func openClaims() error {
	if claimsFile != nil {
		return nil
	}
	f, err := os.OpenFile(claimsPath(), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("remotetest: the claims file that keeps concurrent labs apart: %w", err)
	}
	claimsFile = f
	return nil
}

func lockSlot(s int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(claimBase + s), Len: 1}
	return unix.FcntlFlock(claimsFile.Fd(), unix.F_OFD_SETLK, &lk) == nil
}

func unlockSlot(s int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: int64(claimBase + s), Len: 1}
	_ = unix.FcntlFlock(claimsFile.Fd(), unix.F_OFD_SETLK, &lk)
}

// claimSlot claims a free slot, after sweeping what labs of dead
// processes left in the slots nobody holds: their control link (if the
// kernel has not freed it yet) and their dir.
func claimSlot() (int, error) {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if err := openClaims(); err != nil {
		return 0, err
	}
	slot := -1
	for s := slots - 1; s >= slots-labSlots; s-- {
		if held[s] || !lockSlot(s) {
			continue
		}
		if err := sweep(s); err != nil {
			unlockSlot(s)
			return 0, err
		}
		if slot >= 0 {
			unlockSlot(s)
			continue
		}
		slot = s
	}
	if slot < 0 {
		return 0, fmt.Errorf("remotetest: every one of the %d lab networks at the top of 198.18.0.0/15 is in use", labSlots)
	}
	held[slot] = true
	return slot, nil
}

func releaseSlot(s int) {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	delete(held, s)
	unlockSlot(s)
}

// sweep removes the leftovers of slot s, which this process has just
// claimed.
func sweep(s int) error {
	if err := deleteLink(linkName(s)); err != nil {
		return err
	}
	if err := os.RemoveAll(slotDir(s)); err != nil {
		return fmt.Errorf("remotetest: removing the leftover %s: %w", slotDir(s), err)
	}
	return nil
}

// deleteLink deletes a link of this machine's namespace if it exists.
func deleteLink(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	if _, err := remote.Output(bg(), remote.Local{}, "ip", "link", "del", name); err != nil {
		if _, lookErr := net.InterfaceByName(name); lookErr != nil {
			return nil // its namespace was freed meanwhile
		}
		return fmt.Errorf("remotetest: delete link %s: %w", name, err)
	}
	return nil
}

func linkName(s int) string { return linkPrefix + strconv.Itoa(s) }

// slotDir is the control node's dir of the lab in slot s.
func slotDir(s int) string {
	return filepath.Join(os.TempDir(), "lockbench-lab-"+strconv.Itoa(s))
}

// slotAddr is address last of slot s's /24.
func slotAddr(s int, last byte) netip.Addr {
	return netip.AddrFrom4([4]byte{198, 18 + byte(s>>8), byte(s), last})
}
