package remotetest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/lockbench/lockbench/internal/claims"
	"github.com/lockbench/lockbench/remote"
)

// A lab's addresses are one /24 of 198.18.0.0/15 (RFC 2544's range for
// benchmark networks), a slot claimed in the claims file every lockbench
// process shares (internal/claims): labs take slots from the top of the
// range down (198.19.255.0/24 first), compose's peer networks from the
// bottom up.

// linkPrefix names the control node's end of a lab's uplink:
// lbhosts<slot>.
const linkPrefix = "lbhosts"

var (
	claimsMu sync.Mutex
	held     = map[int]bool{} // slots this process holds
)

// claimSlot claims a free slot, after sweeping what labs of dead
// processes left in the slots nobody holds: their control link (if the
// kernel has not freed it yet) and their dir.
func claimSlot() (int, error) {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	if err := claims.Open(); err != nil {
		return 0, fmt.Errorf("remotetest: %w", err)
	}
	slot := -1
	for s := claims.Slots - 1; s >= claims.Slots-claims.LabSlots; s-- {
		if held[s] {
			continue
		}
		if ok, _ := claims.Slot(s); !ok {
			continue
		}
		if err := sweep(s); err != nil {
			claims.ReleaseSlot(s)
			return 0, err
		}
		if slot >= 0 {
			claims.ReleaseSlot(s)
			continue
		}
		slot = s
	}
	if slot < 0 {
		return 0, fmt.Errorf("remotetest: every one of the %d lab networks at the top of 198.18.0.0/15 is in use", claims.LabSlots)
	}
	held[slot] = true
	return slot, nil
}

func releaseSlot(s int) {
	claimsMu.Lock()
	defer claimsMu.Unlock()
	delete(held, s)
	claims.ReleaseSlot(s)
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
func slotAddr(s int, last byte) netip.Addr { return claims.Addr(s, last) }
