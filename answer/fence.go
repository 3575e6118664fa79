package answer

import (
	"fmt"
	"slices"

	"github.com/lockbench/lockbench/results"
)

// A write-only fence (token = write: the resource rejects a write whose
// token is lower than the last one written) cannot protect a
// read-modify-write section whose holder paused longer than its lease
// while the next holder had not written yet: the late write carries the
// highest token the resource has seen. Every lease lock lets it in alike
// (measured: ZooKeeper, etcd and single Redis under client-pause with
// auto-extend, docs/measurements.md). It is the resource's limit, not a
// lock's: such a late write still keeps a lock from qualifying (the
// service's data would take it), and when no candidate qualifies the
// answer says it is the resource and what would change it.

// fenceLimited reports whether a standing is out only because a
// write-only fence let late writes in after client pauses: stale writes
// accepted under guard fence, all under client-pause, and no lock bug.
func fenceLimited(s standing, p results.Profile) bool {
	if s.qualifies || !s.final || guardFor(p.Token) == guardFenceRW || guardFor(p.Token) == guardNone {
		return false
	}
	g := s.b.guards[guardFence]
	if g == nil || s.b.guards[guardFenceRW] != nil && p.Token == "" {
		return false // judged under fence-rw: the limit was not the fence
	}
	for _, ce := range s.b.classes {
		if ce.lockBug > 0 {
			return false
		}
	}
	return s.b.free.lockBugs == 0 && g.staleAccepted+g.lostUpdates > 0 && g.tokenRegressions == 0 && g.fencedFalse == 0 &&
		len(g.staleClasses) > 0 && !slices.ContainsFunc(g.staleClasses, func(c string) bool { return c != classPause })
}

// fenceWords says, when no candidate qualifies for correctness and some
// are out only by the write-only fence's limit, that the resource is the
// limit and what would change it; "" otherwise.
func fenceWords(out []standing, p results.Profile) string {
	var names []string
	for _, s := range out {
		if fenceLimited(s, p) {
			names = append(names, s.b.name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	pause := "pauses longer than the lease"
	if p.MaxPause > 0 {
		pause = fmt.Sprintf("pauses of up to %s", p.MaxPause)
	}
	change := "the holders' pauses bounded below the lease"
	if p.TTL > 0 {
		change = fmt.Sprintf("the holders' pauses bounded below the lease (--max-pause under the TTL, %s)", p.TTL)
	}
	return fmt.Sprintf("The resource is the limit here, not the locks: with a write-only fence (token: write) a holder that "+
		"pauses longer than its lease inside a read-modify-write section writes late with the highest token the resource "+
		"has seen, and %s let such late writes in under client-pause. No lock can qualify for a service with %s and a "+
		"write-only fence. What would change it: a resource that checks the token on reads too (token: read-write), or %s.",
		joinAnd(names), pause, change)
}
