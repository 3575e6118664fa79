package compose

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Listening ports are drawn from below the kernel's ephemeral range
// (32768–60999), so an outgoing connection never takes a port a node is
// about to listen on.
const (
	portLow  = 12000
	portHigh = 32000
)

var (
	portsMu sync.Mutex
	taken   = map[int]bool{} // handed out by this process
	// claims holds a lock on byte p of a file shared by every process on
	// the machine for each port p this process has handed out (and, far
	// above, for each peer network it holds); nil, with claimsErr, when
	// the file cannot be opened.
	claims     *os.File
	claimsErr  error
	claimsOnce sync.Once
)

// freePorts returns n distinct ports on 127.0.0.1 that nothing listens on,
// that this process has not handed out before, and that no other process
// using compose has claimed. A port stays claimed until the process
// exits, so that a node killed and restarted on its port does not find it
// taken by a node of a concurrent test process (go test runs packages in
// parallel). The claim is an OFD byte-range lock on one shared file, which
// the kernel drops when the process dies, however it dies.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	claimsOnce.Do(openClaims)
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 10000 {
			return nil, fmt.Errorf("compose: no free port in %d-%d after %d tries", portLow, portHigh, tries)
		}
		p := portLow + rand.IntN(portHigh-portLow)
		if taken[p] || !claim(p) {
			continue
		}
		taken[p] = true // claimed: never offered again, free or not
		if !portFree(p) {
			continue
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// claimsPath is the claims file shared by every process using compose.
func claimsPath() string { return filepath.Join(os.TempDir(), "lockbench-ports.lock") }

// openClaims opens the shared claims file, or leaves claims nil (and
// ports with the listen check alone) if it cannot.
func openClaims() {
	claims, claimsErr = os.OpenFile(claimsPath(), os.O_CREATE|os.O_RDWR, 0o666)
}

// claim takes port p for this process unless another process holds it.
func claim(p int) bool {
	if claims == nil {
		return true
	}
	return lockByte(p)
}

// lockByte takes byte off of the claims file unless another process holds
// it; unlockByte gives it up.
func lockByte(off int) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(off), Len: 1}
	return unix.FcntlFlock(claims.Fd(), unix.F_OFD_SETLK, &lk) == nil
}

func unlockByte(off int) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: io.SeekStart, Start: int64(off), Len: 1}
	_ = unix.FcntlFlock(claims.Fd(), unix.F_OFD_SETLK, &lk)
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
