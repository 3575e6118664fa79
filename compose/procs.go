package compose

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// signalProcs sends sig to the server's processes outside its group
// (spec.procs) and returns their pids.
func (n *Node) signalProcs(sig syscall.Signal) []int {
	if n.spec.procs == nil {
		return nil
	}
	pids := n.spec.procs()
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	return pids
}

// killProcs kills what is left of the server outside its group and waits
// until it has gone, so that a restart does not meet the old server's
// children (a PostgreSQL server refuses to start while they live).
func (n *Node) killProcs(children []int) error {
	if n.spec.procs == nil {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	seen := map[int]bool{}
	for _, pid := range children {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		seen[pid] = true
	}
	for {
		// A dying process leaves the list before it is dead: wait for
		// every one seen.
		for _, pid := range n.signalProcs(syscall.SIGKILL) {
			seen[pid] = true
		}
		var left []int
		for pid := range seen {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("compose: %s: processes %v still alive 10s after SIGKILL", n.Name, left)
		}
		<-tick.C
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	parent := []byte(" " + strconv.Itoa(pid) + " ")
	var out []int
	for _, d := range entries {
		p, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the command name: " state ppid ".
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+3 < len(b) && bytes.HasPrefix(b[i+3:], parent) {
			out = append(out, p)
		}
	}
	return out
}

// alive reports whether process pid exists and has not exited (a zombie
// has).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	switch b[i+2] {
	case 'Z', 'X', 'x':
		return false
	}
	return true
}
