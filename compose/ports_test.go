package compose

import (
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lockbench/lockbench/internal/claims"
)

// TestFreePortsClaimed checks that a port handed out is claimed against
// other processes: another open file description of the claims file (as
// another process would have) cannot lock it, and can lock a port that
// was not handed out.
func TestFreePortsClaimed(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	if err := claims.Open(); err != nil {
		t.Skip(err)
	}
	other, err := os.OpenFile(claims.Path(), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock := func(p int) error {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: int64(p), Len: 1}
		return unix.FcntlFlock(other.Fd(), unix.F_OFD_SETLK, &lk)
	}
	for _, p := range ports {
		if lock(p) == nil {
			t.Errorf("port %d was handed out but another process could claim it", p)
		}
	}
	if err := lock(portHigh + 1); err != nil { // outside the range: nobody claims it
		t.Errorf("claiming an unclaimed port: %v", err)
	}
}
