package answer

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// reference picks the workload and durability profile speeds are
// compared on: among the real locks' valid fault-free cases, the ones
// the most backends ran on fresh servers, then the most backends at all,
// many keys rather than the hot key on a tie (on one hot key the hold is
// measured, not the lock), then by name.
func (ev *evidence) reference(f *results.File) {
	type wd struct{ w, d string }
	ran, fresh := map[wd]map[string]bool{}, map[wd]map[string]bool{}
	for i := range f.Cases {
		c := &f.Cases[i]
		if c.Invalid || c.Control || classOf(c) != faultNone {
			continue
		}
		k := wd{workloadOf(c), c.Durability}
		if ran[k] == nil {
			ran[k], fresh[k] = map[string]bool{}, map[string]bool{}
		}
		ran[k][c.Backend] = true
		if c.FreshServers {
			fresh[k][c.Backend] = true
		}
	}
	// The workload most backends ran on fresh servers, whose trials the
	// test can compare; then the one most ran at all (a later round's
	// fault-free cases of candidates it had to judge run on shared
	// servers, and must not take the comparison away from the trials).
	best, most, mostFresh := wd{}, -1, -1
	keys := make([]wd, 0, len(ran))
	for k := range ran {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b wd) int { return cmp.Or(cmp.Compare(a.w, b.w), cmp.Compare(a.d, b.d)) })
	for _, k := range keys {
		n, nf := len(ran[k]), len(fresh[k])
		if c := cmp.Or(cmp.Compare(nf, mostFresh), cmp.Compare(n, most)); c > 0 || (c == 0 && best.w == workloadHot && k.w != workloadHot) {
			best, most, mostFresh = k, n, nf
		}
	}
	ev.workload, ev.durability = best.w, best.d
}

// workloadOf names a case's workload with its load.
func workloadOf(c *results.Case) string {
	if c.Load != "" {
		return c.Workload + "/" + c.Load
	}
	return c.Workload
}

// addSpeeds gathers the backend's fault-free throughput per trial on the
// reference workload and profile, at the client count and guard with the
// most trials, and among those where its median is highest: in round 1
// every count has as many trials, and the peak is chosen; later rounds
// add trials at the counts up to it (SpeedPoint), so the trials they add
// stay in the comparison. Trials that shared servers are one sample.
func (b *backend) addSpeeds(f *results.File, workload, durability string, invalidRuns map[string]bool) {
	type key struct {
		clients int
		guard   string
	}
	trials := map[key]map[int]float64{}
	fresh := map[key]bool{}
	for i := range f.Cases {
		c := &f.Cases[i]
		if c.Backend != b.name || c.Invalid || invalidRuns[runOf(c)] || classOf(c) != faultNone ||
			workloadOf(c) != workload || c.Durability != durability || c.Clients < 1 {
			continue
		}
		k := key{c.Clients, guardOf(c)}
		if trials[k] == nil {
			trials[k], fresh[k] = map[int]float64{}, true
		}
		tp := c.Throughput
		if math.IsNaN(tp) || math.IsInf(tp, 0) || tp < 0 {
			tp = 0
		}
		trials[k][c.Trial] += tp
		fresh[k] = fresh[k] && c.FreshServers
	}
	bestMedian, most := -1.0, 0
	keys := make([]key, 0, len(trials))
	for k := range trials {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.clients, b.clients), cmp.Compare(a.guard, b.guard)) })
	for _, k := range keys {
		var xs []float64
		for _, t := range slices.Sorted(maps.Keys(trials[k])) {
			xs = append(xs, trials[k][t])
		}
		if m := stats.SpreadOf(xs).Median; len(xs) > most || (len(xs) == most && m > bestMedian) {
			bestMedian, most, b.speeds, b.independent, b.peakClients = m, len(xs), xs, fresh[k], k.clients
		}
	}
}

// SpeedPoint returns where the answer compares backend's speed on the
// evidence of f: the reference workload (as results.Case.Workload names
// it) and the client count. The counts past it and the other workloads
// do not enter the comparison, so more trials need not run them. ok is
// false when f has no fault-free trial of the backend on the reference
// workload.
func SpeedPoint(f *results.File, backend string) (workload string, clients int, ok bool) {
	if f == nil {
		return "", 0, false
	}
	ev := gather(f)
	b := ev.backends[backend]
	if b == nil || len(b.speeds) == 0 {
		return "", 0, false
	}
	w, _, _ := strings.Cut(ev.workload, "/")
	return w, b.peakClients, true
}
