package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// The guard modes of results.Case.Guard, and the fault names the report
// gives a meaning to. Any other name is rendered as it is.
const (
	workloadHot  = "hot"
	guardNone    = "none"
	guardFence   = "fence"
	guardFenceRW = "fence-rw"
	// guardFenced is no guard a case runs under but what the rules mean
	// by "with fencing": the strongest token check a case was judged
	// under — fence-rw (reads and writes carry the token) where the case
	// ran it, else fence. Write-only fencing lets a superseded holder's
	// late write in while its successor has not written yet (a successor
	// that holds for seconds before it writes, as the lease loads do):
	// that is the resource's weakness, which the tables show under
	// guard fence, not the lock's; whether the lock's tokens protect a
	// resource is what fence-rw shows.
	guardFenced = "fenced"
	faultNone   = "none"
	faultPause  = "client-pause"
	unsetLabel  = "(unset)"
	unnamedCase = "(unnamed)"
)

// baseName is a backend or fault name without its params: "redlock" for
// "redlock?quarantine=false", "client-pause" for "client-pause?x=1.5".
func baseName(s string) string {
	b, _, _ := strings.Cut(s, "?")
	return b
}

// isControl reports whether a backend is a control, one that excludes
// nobody (the results say so of its cases): it shows that the checker
// sees double grants, and no recommendation may pick it nor throughput
// chart scale to it.
func (ds *dataset) isControl(backend string) bool { return ds.controls[backend] }

// classOf returns a case's fault class: the recorded one, or the fault
// name without its params for files from before the field.
func classOf(c *results.Case) string {
	if c.FaultClass != "" {
		return c.FaultClass
	}
	return baseName(c.Fault)
}

// dataset is a results file prepared for rendering: the valid cases
// grouped and aggregated, the invalid ones set apart, the dimensions
// present in a stable order, and every problem found in the input.
type dataset struct {
	File   *results.File
	Groups []*group
	// Invalid are the cases whose fault failed to inject as planned: they
	// did not measure what their name promises, so no table, chart or
	// conclusion uses them; the report lists them.
	Invalid []results.Case
	// readFenced holds the cases (group.sibling) judged under fence-rw.
	readFenced   map[string]bool
	Backends     []string
	Workloads    []string
	Faults       []string
	Classes      []string
	Guards       []string
	Clients      []int
	Durabilities []string
	// Problems name input the report could not use as it is.
	Problems []string
	// controls are the backends whose cases say they are a control.
	controls map[string]bool
}

// guardOf returns the case's guard mode; an empty Guard is derived from
// Fencing so that older files still group correctly.
func guardOf(c *results.Case) string {
	switch {
	case c.Guard != "":
		return c.Guard
	case c.Fencing:
		return guardFence
	}
	return guardNone
}

func orUnset(s, unset string) string {
	if strings.TrimSpace(s) == "" {
		return unset
	}
	return s
}

// normalised returns the case with its naming fields filled in, so that
// grouping and keys never depend on empty strings.
func normalised(c results.Case) results.Case {
	c.Backend = orUnset(c.Backend, unnamedCase)
	c.Workload = orUnset(c.Workload, unsetLabel)
	if c.Load != "" {
		// A load that provokes a lease's accounting is a workload of its
		// own to every table and chart: its holds are not the sweep's.
		c.Workload += "/" + c.Load
	}
	c.Fault = orUnset(c.Fault, unsetLabel)
	c.FaultClass = orUnset(classOf(&c), unsetLabel)
	c.Guard = guardOf(&c)
	return c
}

// analyse groups and aggregates the valid cases of f and sets the
// invalid ones apart. It never fails: input it cannot use is skipped and
// named in Problems.
func analyse(f *results.File) *dataset {
	ds := &dataset{File: f, controls: map[string]bool{}}
	if f == nil {
		ds.File = &results.File{}
		ds.Problems = append(ds.Problems, "no results file was given")
		return ds
	}
	byKey := map[string][]results.Case{}
	var order []string
	// A run whose fault failed to inject is invalid under every guard it
	// was judged under, whichever of its cases says so.
	invalidRuns := map[string]string{}
	for _, raw := range f.Cases {
		if raw.Invalid && raw.History != "" {
			invalidRuns[runOf(&raw)] = orUnset(raw.InvalidReason, "no reason recorded")
		}
	}
	for _, raw := range f.Cases {
		if raw.Control {
			ds.controls[orUnset(raw.Backend, unnamedCase)] = true
		}
	}
	for i, raw := range f.Cases {
		c := normalised(raw)
		if why, ok := invalidRuns[runOf(&raw)]; ok && !c.Invalid {
			c.Invalid, c.InvalidReason = true, "its run was invalid: "+why
		}
		if c.Invalid {
			ds.Invalid = append(ds.Invalid, c)
			continue
		}
		if c.Clients <= 0 {
			ds.Problems = append(ds.Problems, fmt.Sprintf("case %d (%s): clients %d is not positive; it is kept in the tables but left out of "+
				"per-client charts", i, c.Key(), c.Clients))
		}
		if n, _ := c.Tested(); n > 0 && c.IncidentRateUpper95 > 0 && !plausibleUpper95(c) {
			own := (stats.Rate{K: tallyOf(&c).Hit.Incident, N: int64(n)}).Upper95()
			ds.Problems = append(ds.Problems, fmt.Sprintf("case %d (%s trial %d): incident_rate_upper95 %.4f in the file, %.4f from its %d "+
				"incidents in %d tested injections; the report uses its own",
				i, c.Key(), c.Trial, c.IncidentRateUpper95, own, c.Incidents, n))
		}
		k := c.Key()
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	for _, k := range order {
		g, problems := aggregate(k, byKey[k])
		ds.Groups = append(ds.Groups, g)
		ds.Problems = append(ds.Problems, problems...)
	}
	ds.readFenced = map[string]bool{}
	for _, g := range ds.Groups {
		if g.Guard == guardFenceRW {
			ds.readFenced[g.sibling()] = true
		}
	}
	slices.SortFunc(ds.Groups, func(a, b *group) int {
		return cmp.Or(cmp.Compare(a.Backend, b.Backend), cmp.Compare(a.Workload, b.Workload),
			compareFaults(a.Fault, b.Fault), compareGuards(a.Guard, b.Guard), cmp.Compare(a.Clients, b.Clients),
			cmp.Compare(a.Durability, b.Durability))
	})
	slices.SortFunc(ds.Invalid, func(a, b results.Case) int {
		return cmp.Or(cmp.Compare(a.Backend, b.Backend), compareFaults(a.Fault, b.Fault), cmp.Compare(a.Trial, b.Trial))
	})
	for _, g := range ds.Groups {
		ds.Backends = appendNew(ds.Backends, g.Backend)
		ds.Workloads = appendNew(ds.Workloads, g.Workload)
		ds.Faults = appendNew(ds.Faults, g.Fault)
		ds.Classes = appendNew(ds.Classes, g.FaultClass)
		ds.Guards = appendNew(ds.Guards, g.Guard)
		ds.Clients = appendNew(ds.Clients, g.Clients)
		ds.Durabilities = appendNew(ds.Durabilities, g.profile())
	}
	for _, c := range ds.Invalid { // an invalid case still names what was attempted
		ds.Backends = appendNew(ds.Backends, c.Backend)
	}
	slices.SortFunc(ds.Backends, ds.compareBackends)
	slices.Sort(ds.Workloads)
	slices.SortFunc(ds.Faults, compareFaults)
	slices.SortFunc(ds.Classes, compareFaults)
	slices.SortFunc(ds.Guards, compareGuards)
	slices.Sort(ds.Clients)
	slices.SortFunc(ds.Durabilities, func(a, b string) int {
		order := []string{results.DurabilityFast, results.DurabilityPeriodic, results.DurabilityDurable}
		return cmp.Or(cmp.Compare(rank(a, order...), rank(b, order...)), cmp.Compare(btoi(a == profileNoServers), btoi(b == profileNoServers)),
			cmp.Compare(a, b))
	})
	return ds
}

// durabilityUnset names the profile of cases that recorded none (older
// files).
const durabilityUnset = "not recorded"

// profileNoServers is the profile of a backend without servers (the
// control): nothing to sync, so its numbers belong beside every profile.
const profileNoServers = "no servers"

// serverless reports whether a group's backend has no servers and
// recorded no profile.
func serverless(g *group) bool { return g.Durability == "" && g.Nodes == 0 }

// profile is the durability profile a group is listed under.
func (g *group) profile() string {
	if serverless(g) {
		return profileNoServers
	}
	return orUnset(g.Durability, durabilityUnset)
}

func appendNew[T comparable](s []T, v T) []T {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// compareBackends orders real locks by name and the control last, so
// that the control never takes a real lock's colour or place.
func (ds *dataset) compareBackends(a, b string) int {
	return cmp.Or(cmp.Compare(btoi(ds.isControl(a)), btoi(ds.isControl(b))), cmp.Compare(a, b))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareFaults orders "none" first, then by name (so a class's
// variants sit together).
func compareFaults(a, b string) int {
	return cmp.Or(cmp.Compare(rank(a, faultNone), rank(b, faultNone)), cmp.Compare(a, b))
}

// compareGuards orders none, fence, then by name.
func compareGuards(a, b string) int {
	return cmp.Or(cmp.Compare(rank(a, guardNone, guardFence), rank(b, guardNone, guardFence)), cmp.Compare(a, b))
}

func rank(s string, first ...string) int {
	if i := slices.Index(first, s); i >= 0 {
		return i
	}
	return len(first)
}

// validFloat reports whether v is a finite, non-negative measurement.
func validFloat(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// query selects groups: every non-zero field must match. Durability is
// a profile as group.profile names it; with EveryProfile a backend
// without servers matches any profile, for the fault-free comparisons
// the control sits beside.
type query struct {
	Backend, Workload, Fault, Class, Guard, Durability string
	Clients                                            int
	EveryProfile                                       bool
}

// find returns the groups that match q.
func (ds *dataset) find(q query) []*group {
	var out []*group
	for _, g := range ds.Groups {
		if (q.Backend == "" || g.Backend == q.Backend) && (q.Workload == "" || g.Workload == q.Workload) &&
			(q.Fault == "" || g.Fault == q.Fault) && (q.Class == "" || g.FaultClass == q.Class) &&
			(q.Guard == "" || g.Guard == q.Guard || q.Guard == guardFenced && ds.fenced(g)) && (q.Clients == 0 || g.Clients == q.Clients) &&
			(q.Durability == "" || g.profile() == q.Durability || (q.EveryProfile && serverless(g))) {
			out = append(out, g)
		}
	}
	return out
}

// fenced reports whether g is what the rules take as "with fencing" for
// its case (see guardFenced): its fence-rw group, or its fence group when
// the case was not judged under fence-rw.
func (ds *dataset) fenced(g *group) bool {
	return g.Guard == guardFenceRW || g.Guard == guardFence && !ds.readFenced[g.sibling()]
}

// sibling names the case a group was judged in, whatever its guard: the
// groups of one case under several guards share it.
func (g *group) sibling() string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%d", g.Backend, g.Workload, g.Fault, g.profile(), g.Clients)
}

// nodes returns the largest node count a backend's cases reported.
func (ds *dataset) nodes(backend string) int {
	n := 0
	for _, g := range ds.find(query{Backend: backend}) {
		n = max(n, g.Nodes)
	}
	return n
}

// primaryGuard returns the guard under which the most backends were
// measured for the given workload and fault ("none" on a tie, then the
// guard order), so that one chart compares like with like.
func (ds *dataset) primaryGuard(workload, fault string) string {
	best, bestN := "", -1
	for _, guard := range ds.Guards {
		seen := map[string]bool{}
		for _, g := range ds.find(query{Workload: workload, Fault: fault, Guard: guard}) {
			seen[g.Backend] = true
		}
		if len(seen) > bestN {
			best, bestN = guard, len(seen)
		}
	}
	return best
}

// workloadsUnder returns the workloads measured under a fault, in order.
func (ds *dataset) workloadsUnder(fault string) []string {
	var out []string
	for _, w := range ds.Workloads {
		if len(ds.find(query{Workload: w, Fault: fault})) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// realBackends returns the backends that are locks, without the control.
func (ds *dataset) realBackends() []string {
	var out []string
	for _, b := range ds.Backends {
		if !ds.isControl(b) {
			out = append(out, b)
		}
	}
	return out
}

// classesOf returns the fault classes (other than none) a backend faced
// with at least one valid case, in order.
func (ds *dataset) classesOf(backend string) []string {
	var out []string
	for _, cls := range ds.Classes {
		if cls != faultNone && len(ds.find(query{Backend: backend, Class: cls})) > 0 {
			out = append(out, cls)
		}
	}
	return out
}

// plausibleUpper95 reports whether a case's incident_rate_upper95 is the
// bound of some count of tested injections with an incident that its
// incidents allow: a run counts the injections an incident began after,
// which can be fewer than its incidents (two after one strike; the
// control's, which need no fault).
func plausibleUpper95(c results.Case) bool {
	n, _ := c.Tested()
	for k := range min(c.Incidents, int64(n)) + 1 {
		if math.Abs((stats.Rate{K: k, N: int64(n)}).Upper95()-c.IncidentRateUpper95) <= 0.005 {
			return true
		}
	}
	return false
}
