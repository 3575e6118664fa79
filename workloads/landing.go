package workloads

import (
	"fmt"
	"strings"

	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/results"
)

// landed writes where each pause of a client process landed (the
// history's Landings) into the injection that made it, and counts the
// pauses by point: an injection whose pause missed its point did not test
// what its fault names, and says where it landed instead. The nemesis
// names a pause's target "process N", and a process's pauses come one
// after another, so the k-th landing of a process is its k-th injection.
func landed(targets []results.Target, ls []history.Landing) ([]results.Target, map[string]int) {
	if len(ls) == 0 {
		return targets, nil
	}
	counts := map[string]int{}
	byProc := map[int][]history.Landing{}
	for _, l := range ls {
		counts[string(l.Landed)]++
		if l.InExtend {
			counts[string(history.PointExtend)]++
		}
		byProc[l.Process] = append(byProc[l.Process], l)
	}
	for i := range targets {
		t := &targets[i]
		p, ok := pausedProcess(*t)
		if !ok || len(byProc[p]) == 0 {
			continue
		}
		l := byProc[p][0]
		byProc[p] = byProc[p][1:]
		t.Aimed, t.Landed = string(l.Aimed), string(l.Landed)
		if l.InExtend {
			t.Landed += "+" + string(history.PointExtend)
		}
		if l.Hit() {
			if t.Tested == nil {
				yes := true
				t.Tested = &yes
			}
			continue
		}
		no := false
		t.Tested = &no
		why := fmt.Sprintf("the pause was aimed at %s and landed at %s", l.Aimed, l.Landed)
		t.WhyNot = strings.TrimPrefix(strings.Join([]string{t.WhyNot, why}, "; "), "; ")
	}
	return targets, counts
}

// pausedProcess returns the client process a target names ("process N").
func pausedProcess(t results.Target) (int, bool) {
	if len(t.Nodes) != 1 {
		return 0, false
	}
	var p int
	if _, err := fmt.Sscanf(t.Nodes[0], "process %d", &p); err != nil {
		return 0, false
	}
	return p, true
}

// Landed is targets as the results record them once the pauses' landings
// (a history's Landings) are read: what lockbench check derives from a
// history's inject ops to verify the tested flags of results.json.
func Landed(targets []results.Target, ls []history.Landing) []results.Target {
	out, _ := landed(targets, ls)
	return out
}
