package compose

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
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

// freePorts returns n distinct ports on 127.0.0.1 that nothing listens on
// and that this process has not handed out before. Other processes running
// tests at the same time draw from the same range at random, and the
// listen check makes a collision unlikely.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries > 10000 {
			return nil, fmt.Errorf("compose: no free port in %d-%d after %d tries", portLow, portHigh, tries)
		}
		p := portLow + rand.IntN(portHigh-portLow)
		if taken[p] || !portFree(p) {
			continue
		}
		taken[p] = true
		ports = append(ports, p)
	}
	return ports, nil
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
