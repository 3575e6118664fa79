package results

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Merge combines results files measured at the same time by several
// load-generator hosts into one. Cases with the same Key and Trial are
// combined:
//
//   - what each host measured of its own operations adds up: grants,
//     throughput, errors, timelines, the availability throughputs, and
//     the HDR histograms, which merge without loss (the percentiles are
//     those of all the hosts' operations together);
//   - what the judge counted is taken once: in a run with a run id every
//     host's file carries the judge's joint safety counts for the case
//     (overlaps and incidents across all hosts, stale writes, the
//     verdicts, injections and targets), identical across hosts, so a
//     sum would count each violation once per host. Should the hosts
//     disagree, the larger count is kept and the case says so in a note.
//
// Files without a run id come from before the judge, when each host
// checked its own resource on its own keys: their safety counts are
// disjoint and are summed, as they always were. Files of different runs
// (different run ids or seeds) are refused.
func Merge(files ...*File) (*File, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("merge: no results")
	}
	first := files[0]
	out := &File{
		Version: Version, Started: first.Started, Finished: first.Finished, Machine: first.Machine,
		Command: first.Command, RunID: first.RunID, Seed: first.Seed, Suite: first.Suite,
		Cores: first.Cores, MemoryBytes: first.MemoryBytes,
	}
	for i, f := range files {
		if f.RunID != first.RunID {
			return nil, fmt.Errorf("merge: file %d is of run %q, file 1 of run %q: only the hosts of one run merge", i+1, f.RunID, first.RunID)
		}
		if f.Seed != first.Seed {
			return nil, fmt.Errorf("merge: file %d has seed %d, file 1 seed %d: only the hosts of one run merge", i+1, f.Seed, first.Seed)
		}
	}
	joint := first.RunID != ""
	index := map[string]int{}
	for _, f := range files {
		if f.Started.Before(out.Started) {
			out.Started = f.Started
		}
		if f.Finished.After(out.Finished) {
			out.Finished = f.Finished
		}
		out.Partial = out.Partial || f.Partial
		if f.Machine != "" && !strings.Contains(out.Machine, f.Machine) {
			out.Machine = joinNonEmpty("; ", out.Machine, f.Machine)
		}
		out.Suite = cmpOr(out.Suite, f.Suite)
		if out.Profile == nil {
			out.Profile = f.Profile // the hosts of one run answer for one service; the answer is decided afresh
		}
		for _, h := range f.Hosts {
			if !slices.Contains(out.Hosts, h) {
				out.Hosts = append(out.Hosts, h)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(f.Versions)) {
			if out.Versions == nil {
				out.Versions = map[string]string{}
			}
			switch v, ok := out.Versions[k]; {
			case !ok:
				out.Versions[k] = f.Versions[k]
			case !slices.Contains(strings.Split(v, " / "), f.Versions[k]):
				out.Versions[k] = v + " / " + f.Versions[k]
			}
		}
		for _, s := range f.Skipped {
			if !slices.Contains(out.Skipped, s) {
				out.Skipped = append(out.Skipped, s)
			}
		}
		for _, c := range f.Cases {
			k := fmt.Sprintf("%s|%d", c.Key(), c.Trial)
			i, ok := index[k]
			if !ok {
				index[k] = len(out.Cases)
				out.Cases = append(out.Cases, c)
				continue
			}
			merged, err := mergeCase(out.Cases[i], c, joint)
			if err != nil {
				return nil, fmt.Errorf("merge %s trial %d: %w", c.Key(), c.Trial, err)
			}
			out.Cases[i] = merged
		}
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// mergeCase combines two hosts' records of one case; joint says whether
// the safety counts are the judge's (taken once) or each host's own
// (summed).
func mergeCase(a, b Case, joint bool) (Case, error) {
	m := a
	m.Host = joinHosts(a.Host, b.Host)
	m.Clients = a.Clients // the same combination: clients per host
	m.Acquired += b.Acquired
	m.DurationS = max(a.DurationS, b.DurationS)
	if m.DurationS > 0 {
		m.Throughput = float64(m.Acquired) / m.DurationS
	}
	m.Errors = map[string]int64{}
	for _, e := range []map[string]int64{a.Errors, b.Errors} {
		for k, v := range e {
			m.Errors[k] += v
		}
	}
	m.Timeline = make([]int64, max(len(a.Timeline), len(b.Timeline)))
	for i := range m.Timeline {
		if i < len(a.Timeline) {
			m.Timeline[i] += a.Timeline[i]
		}
		if i < len(b.Timeline) {
			m.Timeline[i] += b.Timeline[i]
		}
	}
	m.Notes = slices.Clone(a.Notes)
	for _, n := range b.Notes {
		if !slices.Contains(m.Notes, n) {
			m.Notes = append(m.Notes, n)
		}
	}
	for _, w := range b.FaultWindows {
		if !slices.Contains(m.FaultWindows, w) {
			m.FaultWindows = append(m.FaultWindows, w)
		}
	}
	m.Invalid = a.Invalid || b.Invalid
	if b.InvalidReason != "" && b.InvalidReason != a.InvalidReason {
		m.InvalidReason = joinNonEmpty("; ", a.InvalidReason, b.InvalidReason)
	}
	m.Availability = mergeAvailability(a.Availability, b.Availability)
	mergeSafety(&m, a, b, joint)

	var err error
	if m.Histograms.Acquire, m.LatencyUS, err = mergeHist(a.Histograms.Acquire, b.Histograms.Acquire); err != nil {
		return m, err
	}
	if m.Histograms.Hold, m.HoldUS, err = mergeHist(a.Histograms.Hold, b.Histograms.Hold); err != nil {
		return m, err
	}
	if m.Histograms.Release, m.ReleaseUS, err = mergeHist(a.Histograms.Release, b.Histograms.Release); err != nil {
		return m, err
	}
	return m, nil
}

// mergeSafety sets m's safety counts from a's and b's: summed when each
// host counted its own, taken once (the larger, with a note, should they
// differ) when both carry the judge's joint counts.
func mergeSafety(m *Case, a, b Case, joint bool) {
	counts := []struct {
		name string
		dst  *int64
		x, y int64
	}{
		{"overlaps", &m.Overlaps, a.Overlaps, b.Overlaps},
		{"stale_accepted", &m.StaleAccepted, a.StaleAccepted, b.StaleAccepted},
		{"stale_rejected", &m.StaleRejected, a.StaleRejected, b.StaleRejected},
		{"lost_updates", &m.LostUpdates, a.LostUpdates, b.LostUpdates},
		{"token_regressions", &m.TokenRegressions, a.TokenRegressions, b.TokenRegressions},
		{"overlaps_lock_bug", &m.OverlapsLockBug, a.OverlapsLockBug, b.OverlapsLockBug},
		{"overlaps_expired_holder", &m.OverlapsExpiredHolder, a.OverlapsExpiredHolder, b.OverlapsExpiredHolder},
		{"incidents", &m.Incidents, a.Incidents, b.Incidents},
		{"incidents_lock_bug", &m.IncidentsLockBug, a.IncidentsLockBug, b.IncidentsLockBug},
		{"incidents_expired_holder", &m.IncidentsExpiredHolder, a.IncidentsExpiredHolder, b.IncidentsExpiredHolder},
		{"overlaps_ambiguous", &m.OverlapsAmbiguous, a.OverlapsAmbiguous, b.OverlapsAmbiguous},
		{"incidents_ambiguous", &m.IncidentsAmbiguous, a.IncidentsAmbiguous, b.IncidentsAmbiguous},
		{"contended_grants", &m.ContendedGrants, a.ContendedGrants, b.ContendedGrants},
		{"validity_short", &m.ValidityShort, a.ValidityShort, b.ValidityShort},
		{"validity_long", &m.ValidityLong, a.ValidityLong, b.ValidityLong},
		{"lease_ends", &m.LeaseEnds, a.LeaseEnds, b.LeaseEnds},
		{"stale_told", &m.StaleTold, a.StaleTold, b.StaleTold},
		{"stale_silent", &m.StaleSilent, a.StaleSilent, b.StaleSilent},
	}
	var differ []string
	for _, c := range counts {
		switch {
		case !joint:
			*c.dst = c.x + c.y
		case c.x != c.y:
			differ = append(differ, fmt.Sprintf("%s %d vs %d", c.name, c.x, c.y))
			fallthrough
		default:
			*c.dst = max(c.x, c.y)
		}
	}
	// The nemesis runs once per case, however many hosts load it.
	m.Injections = max(a.Injections, b.Injections)
	if joint && a.Injections != b.Injections {
		differ = append(differ, fmt.Sprintf("injections %d vs %d", a.Injections, b.Injections))
	}
	if len(b.Targets) > len(a.Targets) {
		m.Targets = b.Targets
	}
	m.ValidityShortMaxMS = max(a.ValidityShortMaxMS, b.ValidityShortMaxMS)
	m.ValidityLongMaxMS = max(a.ValidityLongMaxMS, b.ValidityLongMaxMS)
	switch x, y := a.InjectionsTested, b.InjectionsTested; {
	case x == nil:
		m.InjectionsTested = y
	case y != nil && *y != *x:
		n := max(*x, *y)
		m.InjectionsTested = &n
		if joint {
			differ = append(differ, fmt.Sprintf("injections tested %d vs %d", *x, *y))
		}
	}
	m.IncidentRateUpper95 = max(a.IncidentRateUpper95, b.IncidentRateUpper95)
	m.Linearizable, m.LinearizableReason = worse(a.Linearizable, a.LinearizableReason, b.Linearizable, b.LinearizableReason)
	m.LinearizableFenced, m.LinearizableFencedReason = worse(a.LinearizableFenced, a.LinearizableFencedReason, b.LinearizableFenced,
		b.LinearizableFencedReason)
	if joint && (a.Linearizable != b.Linearizable || a.LinearizableFenced != b.LinearizableFenced) {
		differ = append(differ, "linearizability verdicts")
	}
	m.History = cmpOr(a.History, b.History)
	if len(differ) > 0 {
		m.Notes = append(m.Notes, fmt.Sprintf("merge: hosts %s and %s carried different joint safety counts (%s); the judge's counts should be "+
			"identical on every host, so the larger of each was kept",
			orDash(a.Host), orDash(b.Host), strings.Join(differ, ", ")))
	}
}

func orDash(s string) string { return cmpOr(s, "—") }

// worse returns the less favourable of two verdicts: false over unknown
// over true over unchecked.
func worse(a Verdict, ar string, b Verdict, br string) (Verdict, string) {
	rank := map[Verdict]int{"": 0, Linearizable: 1, Unknown: 2, NotLinearizable: 3}
	if rank[b] > rank[a] {
		return b, br
	}
	return a, ar
}

// mergeAvailability adds the hosts' grant rates and keeps the worse
// tail and the slower recovery of each window (a window in which either
// host did not recover was not recovered).
func mergeAvailability(a, b *Availability) *Availability {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	m := &Availability{
		BaselineThroughput: a.BaselineThroughput + b.BaselineThroughput,
		InFaultThroughput:  a.InFaultThroughput + b.InFaultThroughput,
		InFaultP99US:       max(a.InFaultP99US, b.InFaultP99US),
		RecoveryS:          make([]float64, max(len(a.RecoveryS), len(b.RecoveryS))),
	}
	for i := range m.RecoveryS {
		var x, y float64
		if i < len(a.RecoveryS) {
			x = a.RecoveryS[i]
		}
		if i < len(b.RecoveryS) {
			y = b.RecoveryS[i]
		}
		m.RecoveryS[i] = max(x, y)
		if x < 0 || y < 0 {
			m.RecoveryS[i] = -1
		}
	}
	return m
}

func mergeHist(a, b string) (string, Percentiles, error) {
	ha, err := Decode(a)
	if err != nil {
		return "", Percentiles{}, err
	}
	hb, err := Decode(b)
	if err != nil {
		return "", Percentiles{}, err
	}
	ha.Merge(hb)
	s, err := Encode(ha)
	return s, Summarise(ha), err
}

func joinHosts(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "" || a == b:
		return a
	}
	return a + "+" + b
}
