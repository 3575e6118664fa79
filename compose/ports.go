package compose

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"

	"github.com/lockbench/lockbench/internal/claims"
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

// claim takes port p for this process unless another process holds it;
// without the claims file, the listen check alone keeps ports apart.
func claim(p int) bool {
	ok, err := claims.Port(p)
	return ok || err != nil
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
