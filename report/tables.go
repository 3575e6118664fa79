package report

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/stats"
)

// statsOf is a verdict's peak speed as a Spread.
func statsOf(v Verdict) stats.Spread {
	return stats.Spread{N: v.Trials, Median: v.Throughput, Min: v.ThroughputMin, Max: v.ThroughputMax}
}

// speedSection has, per workload and durability profile without
// faults, a row per backend: throughput at each client count and
// acquire percentiles, each a median over trials with its range, and
// the lock's own cost.
func (ds *dataset) speedSection(d *document, latencyClients int) {
	d.h(2, "Speed per backend")
	workloads := ds.workloadsUnder(faultNone)
	if len(workloads) == 0 {
		d.p(`No valid fault-free (fault "none") cases were measured, so there is no throughput or latency summary.`)
	}
	for _, w := range workloads {
		for _, dur := range ds.Durabilities {
			if dur == profileNoServers || len(ds.find(query{Workload: w, Fault: faultNone, Durability: dur})) == 0 {
				continue // the control is in every profile's table
			}
			guard := ds.primaryGuard(w, faultNone)
			clients := ds.latencyClients(w, guard, latencyClients)
			d.h(3, fmt.Sprintf("Workload %s, %s profile", w, dur))
			d.p(fmt.Sprintf("Fault none, guard %s. Each cell is the median over trials with the slowest–fastest trial in brackets: throughput in "+
				"grants/s at each client count, acquire latency percentiles at %d clients. Own cost is acquire p50 + release p50 at 1 client, where "+
				"nobody waits. A difference counts only where the rank-sum test over independent trials (on fresh servers: trials that share "+
				"servers count as one) finds it at the recommendation's family-wise 5%% level: never with fewer than %d trials each. Fault-free "+
				"incidents are per contended grant (a grant made while another client of the key waited: an uncontended one cannot overlap), with "+
				"their 95%% bound.", guard, clients, minSpeedTrials))
			d.table(ds.summaryTable(w, guard, dur, clients))
		}
	}
}

// summaryTable has a row per backend (the control last): throughput at
// each client count, acquire percentiles at one client count, own cost,
// trials and fault-free incidents.
func (ds *dataset) summaryTable(workload, guard, durability string, latClients int) table {
	var clients []int
	all := ds.find(query{Workload: workload, Fault: faultNone, Guard: guard, Durability: durability, EveryProfile: true})
	way := dominantWay(all)
	ways := map[int]string{}
	for _, g := range all {
		if g.Clients > 0 {
			clients = appendNew(clients, g.Clients)
			if w := wayOf(g); w != way {
				ways[g.Clients] = w
			}
		}
	}
	slices.Sort(clients)
	t := table{header: []string{"backend", "nodes"}}
	for _, c := range clients {
		h := fmt.Sprintf("grants/s @%d", c)
		if w := ways[c]; w != "" {
			h += " (" + w + ")" // measured another way than the other columns
		}
		t.header = append(t.header, h)
	}
	t.header = append(t.header, fmt.Sprintf("p50 @%d", latClients), fmt.Sprintf("p99 @%d", latClients), "own cost @1", "trials",
		"incidents, no fault")
	for i := range t.header {
		t.numeric = append(t.numeric, i > 0)
	}
	for _, b := range ds.Backends {
		gs := ds.find(query{Backend: b, Workload: workload, Fault: faultNone, Durability: durability, EveryProfile: true})
		if len(gs) == 0 {
			continue
		}
		name := b
		if ds.isControl(b) {
			name += " (control)"
		}
		row := []string{name, strconv.Itoa(ds.nodes(b))}
		trials := 0
		for _, c := range clients {
			cell := "—"
			if gs := ds.find(query{Backend: b, Workload: workload, Fault: faultNone, Guard: guard, Clients: c, Durability: durability,
				EveryProfile: true}); len(gs) > 0 {
				cell = spreadRate(gs[0].Speed)
				trials = max(trials, gs[0].Trials)
			}
			row = append(row, cell)
		}
		if gs := ds.find(query{Backend: b, Workload: workload, Fault: faultNone, Guard: guard, Clients: latClients, Durability: durability,
			EveryProfile: true}); len(gs) > 0 && gs[0].Acquired > 0 {
			row = append(row, spreadUS(gs[0].P50), spreadUS(gs[0].P99))
		} else {
			row = append(row, "—", "—")
		}
		cost := "—"
		if gs := ds.find(query{Backend: b, Workload: workload, Fault: faultNone, Clients: 1, Durability: durability,
			EveryProfile: true}); len(gs) > 0 && gs[0].Acquired > 0 {
			cost = spreadUS(gs[0].OwnCost)
		}
		tt := totals(gs)
		row = append(row, cost, strconv.Itoa(trials), perGrant(tt.Incidents, tt.Contended).cell())
		t.rows = append(t.rows, row)
		t.flag = append(t.flag, tt.Incidents > 0 && !ds.isControl(b))
	}
	return t
}

// safetySection shows the safety evidence twice: per backend × fault
// class (every guard, param and trial pooled: what the recommendation
// compares), and per fault × guard × profile in full.
func (ds *dataset) safetySection(d *document) {
	d.h(2, "Safety with bounds")
	if len(ds.Groups) == 0 {
		d.p("No valid cases, so no safety measurements.")
		return
	}
	d.p("Under a fault each count is k/n ≤u: k of the n tested injections of the class were followed by at least one such event (an " +
		"injection is a trial: three incidents after one are one failure), with u the one-sided 95% upper bound on that rate (exact binomial; " +
		"zero in n gives 1 − 0.05^(1/n)). An injection is tested when it met what its class is meant to test (a held key at the strike, a " +
		"lock that was granting) and its effect was read back; the others are counted apart and enter no rate. Without a fault, k events in " +
		"n contended grants: grants made while another client of the key was waiting. Classes are never pooled: each row is one backend " +
		"under one fault class and durability profile.")
	d.p("A stale write is told when the holder's lease had told it, before it wrote, that it had ended (expired, lost, or past its " +
		"ValidUntil: the lock revoked it in time, and a careful client that checks its lease holds back), silent when the lease said nothing " +
		"(only a fencing resource stops it). An incident is an episode of two holders of one key, judged against the lock's contract, not " +
		"against what its leases reported: the earlier grant keeps the key until its Acquire was called plus the Promise its backend " +
		"declares (the TTL less the declared drift, or its session timeout). A lock bug when the later grant returned, for certain, before " +
		"that line (incidents the judge did not classify count as lock bugs); an expired holder when, for certain, after it — the earlier " +
		"holder went on after its lease had ended, what fencing is for; ambiguous when the judge's clock bounds (its round trips to the " +
		"clients) cannot place it on either side: counted and shown, never folded into either. Stale writes are writes by a holder whose " +
		"lease had ended, which the resource accepted or rejected.")
	d.h(3, "Per backend and fault class")
	d.p("\"Fenced\" is the strongest token check a case was judged under, as the rules take it: guard fence-rw (reads and writes carry the " +
		"token) where the case ran it, else fence (writes only, which lets a superseded holder's late write in while its successor has not " +
		"written yet); the table after this one shows every guard apart.")
	t := table{header: []string{"backend", "fault class", "profile", "cases", "tested injections", "lock-bug incidents",
		"ambiguous incidents", "expired-holder incidents", "stale accepted, fenced", "stale accepted, unfenced", "stale rejected"},
		numeric: []bool{false, false, false, true, true, true, true, true, true, true, true}}
	for _, b := range ds.Backends {
		for _, cls := range ds.Classes {
			for _, dur := range ds.Durabilities {
				gs := ds.find(query{Backend: b, Class: cls, Durability: dur})
				if len(gs) == 0 {
					continue
				}
				s := totals(gs)
				fs, ns := totals(ds.find(query{Backend: b, Class: cls, Durability: dur, Guard: guardFenced})), totals(ds.find(query{Backend: b,
					Class: cls, Durability: dur, Guard: guardNone}))
				rate := func(x group, k kind) string { return rateOf(x, k, cls).cell() }
				fenced, unfenced := "not run", "not run"
				switch {
				case fs.Cases > 0 && !fs.Fencing:
					fenced = "no tokens to check"
				case fs.Cases > 0:
					fenced = rate(fs, kindStale)
				}
				if ns.Cases > 0 {
					unfenced = rate(ns, kindStale)
				}
				t.rows = append(t.rows, []string{b, cls, dur, strconv.Itoa(s.Cases), injectionsText(s), rate(s, kindLockBug), rate(s, kindAmbiguous),
					rate(s, kindExpired), fenced, unfenced, itoa(s.StaleRejected)})
				t.flag = append(t.flag, (s.lockBugs() > 0 || (fs.Fencing && fs.StaleAccepted > 0)) && !ds.isControl(b))
			}
		}
	}
	d.table(t)
	d.p("Rows in bold (highlighted) had a lock-bug incident, or a stale write accepted with fencing on.")

	d.h(3, "Per fault, guard and profile")
	full := table{
		header: []string{"fault", "backend", "guard", "profile", "tokens checked", "tested injections", "lock-bug incidents",
			"ambiguous incidents", "expired-holder incidents", "stale accepted", "stale rejected", "stale: told / silent", "lost updates",
			"token regressions", "porcupine: mutex", "porcupine: fenced", "trials", "notes"},
		numeric: []bool{false, false, false, false, false, true, true, true, true, true, true, true, true, true, false, false, true, false},
		folded:  "Every fault (with its params) × backend × guard × durability profile",
	}
	for _, f := range ds.Faults {
		for _, b := range ds.Backends {
			for _, guard := range ds.Guards {
				for _, dur := range ds.Durabilities {
					gs := ds.find(query{Backend: b, Fault: f, Guard: guard, Durability: dur})
					if len(gs) == 0 {
						continue
					}
					s := totals(gs)
					tokens := "no"
					switch {
					case s.Fencing && s.Unfenced:
						tokens = "some cases"
					case s.Fencing:
						tokens = "yes"
					}
					cls := gs[0].FaultClass
					rate := func(k kind) string { return rateOf(s, k, cls).cell() }
					// Lost updates and token regressions are not charged to
					// injections: they are counts, per contended grant
					// without a fault.
					count := func(k int64) string {
						if cls == faultNone {
							return perGrant(k, s.Contended).cell()
						}
						return itoa(k)
					}
					full.rows = append(full.rows, []string{f, b, guard, dur, tokens, injectionsText(s), rate(kindLockBug), rate(kindAmbiguous),
						rate(kindExpired),
						rate(kindStale), itoa(s.StaleRejected), fmt.Sprintf("%d / %d", s.StaleTold,
							s.StaleSilent), count(s.LostUpdates), count(s.TokenRegressions),
						s.Linearizable.String(), s.LinearizableFenced.String(), strconv.Itoa(s.Trials), brief(s.Notes)})
					full.flag = append(full.flag, s.violations() > 0)
				}
			}
		}
	}
	d.table(full)
	ds.contractSection(d)
}

// contractSection tabulates, per backend, the contract its checks were
// drawn by and how its leases' own ValidUntil compared with it.
func (ds *dataset) contractSection(d *document) {
	t := table{header: []string{"backend", "TTL", "promise (contract line)", "longest validity", "grants", "reported less than the " +
		"contract", "reported more than the lock can give"},
		numeric: []bool{false, true, true, true, true, true, true}}
	for _, b := range ds.Backends {
		type contract struct{ ttl, promise, most float64 }
		seen := map[contract]bool{}
		var cs []contract
		for _, g := range ds.find(query{Backend: b}) {
			if c := (contract{g.TTLMillis, g.PromiseMS, g.MaxValidityMS}); !seen[c] && c.promise > 0 {
				seen[c] = true
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			continue
		}
		s := totals(ds.find(query{Backend: b}))
		ttls, promises, most := make([]string, len(cs)), make([]string, len(cs)), make([]string, len(cs))
		for i, c := range cs {
			ttls[i], promises[i], most[i] = fmtMS(c.ttl), fmtMS(c.promise), fmtMS(c.most)
		}
		departure := func(n int64, maxMS float64) string {
			if n == 0 {
				return "0"
			}
			return fmt.Sprintf("%s (by up to %s)", itoa(n), fmtMS(maxMS))
		}
		t.rows = append(t.rows, []string{b, strings.Join(ttls, ", "), strings.Join(promises, ", "), strings.Join(most, ", "), itoa(s.Acquired),
			departure(s.ValidityShort, s.ValidityShortMaxMS), departure(s.ValidityLong, s.ValidityLongMaxMS)})
		t.flag = append(t.flag, s.ValidityShort+s.ValidityLong > 0 && !ds.isControl(b))
	}
	if len(t.rows) == 0 {
		return
	}
	d.h(3, "Leases against their contract")
	d.p("The line between a lock bug and an expired holder is each backend's declared contract, not what its leases report: nobody else is " +
		"granted the key until the Acquire call plus the promise (the TTL less the drift the backend declares, or its session timeout), and no " +
		"grant keeps it longer than the longest validity (the TTL as the backend applies it, capped at the session). Each grant's own " +
		"ValidUntil is recorded beside it; a lease that reported less than the promise would, if it drew the line, turn the lock's double " +
		"grants into expired holders, and one that reported more than the lock can give lets a holder that trusts it write after the key " +
		"went to someone else. Rows in bold departed in either direction: a finding about the backend, whatever its incidents.")
	d.table(t)
}

// fmtMS formats milliseconds: "988 ms", "3.8 s".
func fmtMS(ms float64) string {
	if ms >= 1000 {
		return trimZero(fmt.Sprintf("%.3f", ms/1000)) + " s"
	}
	return trimZero(fmt.Sprintf("%.1f", ms)) + " ms"
}

// injectionsText is the count of injections that enter rates, with the
// untested ones beside it, marked when they were inferred from fault
// windows or not judged; "—" without a fault.
func injectionsText(t group) string {
	if t.Injections == 0 && t.Untested == 0 {
		return "—"
	}
	s := itoa(t.Injections)
	if t.Untested > 0 {
		s += fmt.Sprintf(" (+%d untested)", t.Untested)
	}
	switch {
	case t.InjectionsInferred:
		s += " (from windows)"
	case t.Unjudged:
		s += " (not judged)"
	}
	return s
}

// availabilitySection tabulates the service inside the fault windows.
func (ds *dataset) availabilitySection(d *document) {
	d.h(2, "Availability under faults")
	t := table{header: []string{"backend", "fault", "profile", "cases", "baseline grants/s", "in-fault grants, share of " +
		"baseline", "in-fault acquire p99", "recovery after a window", "not recovered"},
		numeric: []bool{false, false, false, true, true, true, true, true, true}}
	for _, b := range ds.Backends {
		for _, f := range ds.Faults {
			for _, dur := range ds.Durabilities {
				gs := ds.find(query{Backend: b, Fault: f, Durability: dur})
				s := totals(gs)
				if len(s.InFault)+len(s.Recovery)+len(s.InFaultP99) == 0 {
					continue
				}
				never := 0
				for _, r := range s.Recovery {
					if r > 1e300 {
						never++
					}
				}
				t.rows = append(t.rows, []string{b, f, dur, strconv.Itoa(s.Cases), ds.baselineText(gs), spreadPct(stats.SpreadOf(s.InFault)),
					spreadUS(stats.SpreadOf(s.InFaultP99)),
					spreadSeconds(stats.SpreadOf(s.Recovery)), fmt.Sprintf("%d of %d windows", never, len(s.Recovery))})
				t.flag = append(t.flag, never > 0)
			}
		}
	}
	if len(t.rows) == 0 {
		d.p("No valid case recorded availability inside fault windows, so availability could not count for either recommendation.")
		return
	}
	d.p("Inside the fault windows: grants per second as a share of the same case's rate before the first window (median over cases, range " +
		"in brackets), the acquire p99 of operations begun inside a window, and per window the time from its end until grants ran at half the " +
		"baseline again. Rows in bold had a window after which the backend did not recover before the case ended.")
	d.table(t)
}

// baselineText is the median baseline rate of the groups' cases.
func (ds *dataset) baselineText(gs []*group) string {
	var xs []float64
	for _, g := range gs {
		for _, c := range ds.casesOf(g) {
			if c.Availability != nil {
				xs = append(xs, c.Availability.BaselineThroughput)
			}
		}
	}
	if len(xs) == 0 {
		return "—"
	}
	return spreadRate(stats.SpreadOf(xs))
}

// casesOf returns the valid cases of a group from the file.
func (ds *dataset) casesOf(g *group) []results.Case {
	var out []results.Case
	for _, raw := range ds.File.Cases {
		if c := normalised(raw); !c.Invalid && c.Key() == g.Key {
			out = append(out, c)
		}
	}
	return out
}

// casesSection lists, per combination, what the judge and the nemesis
// recorded: how the clients ran, injections and their targets,
// incidents by class, the checkers' verdicts and the history files.
func (ds *dataset) casesSection(d *document) {
	d.h(2, "Cases")
	if len(ds.Groups) == 0 {
		d.p("No valid cases.")
		return
	}
	d.p("Per combination of backend, workload, fault, guard, clients and profile (trials pooled): how its clients ran (worker processes, " +
		"which a pause freezes whole, or goroutines), what the nemesis hit, the incidents by class, and porcupine's verdicts against a mutex " +
		"model and a fenced-mutex model (tokens strictly increasing in real-time order). A false mutex verdict is expected wherever incidents " +
		"were counted.")
	t := table{
		header: []string{"backend", "workload", "fault", "guard", "profile", "clients", "clients as", "trials", "tested injections",
			"targets", "incidents: lock bug / ambiguous / expired / unclassified", "porcupine: mutex", "porcupine: fenced", "histories"},
		numeric: []bool{false, false, false, false, false, true, false, true, true, false, false, false, false, false},
		folded:  fmt.Sprintf("%d combinations", len(ds.Groups)),
	}
	for _, g := range ds.Groups {
		hist := "—"
		if n := len(g.Histories); n > 0 {
			hist = g.Histories[0]
			if n > 1 {
				hist += fmt.Sprintf(" (+%d)", n-1)
			}
		}
		lin, fen := g.Linearizable.withReasons(), g.LinearizableFenced.withReasons()
		t.rows = append(t.rows, []string{g.Backend, g.Workload, g.Fault, g.Guard, orUnset(g.Durability, durabilityUnset), strconv.Itoa(g.Clients),
			orUnset(strings.Join(g.ClientsAs, ", "),
				"not recorded"), strconv.Itoa(g.Trials), injectionsText(totals([]*group{g})), targetsText(g.Targets),
			fmt.Sprintf("%d / %d / %d / %d", g.IncidentsLockBug, g.IncidentsAmbiguous, g.IncidentsExpired, g.IncidentsUnclassified), lin, fen, hist})
		t.flag = append(t.flag, g.violations() > 0 && !ds.isControl(g.Backend))
	}
	d.table(t)
}

// targetsText summarises what the injections hit: how often the leader
// or a priority node was among the targets, and each node's count.
func targetsText(ts []results.Target) string {
	if len(ts) == 0 {
		return "—"
	}
	var leader, priority int
	hits := map[string]int{}
	for _, t := range ts {
		if t.Leader {
			leader++
		}
		if t.Priority {
			priority++
		}
		for _, n := range t.Nodes {
			hits[n]++
		}
	}
	var parts []string
	untested := map[string]int{}
	for _, t := range ts {
		if !t.Counted() {
			untested[orUnset(t.WhyNot, "no reason recorded")]++
		}
	}
	for _, why := range slices.Sorted(maps.Keys(untested)) {
		parts = append(parts, fmt.Sprintf("untested ×%d: %s", untested[why], why))
	}
	if leader > 0 {
		parts = append(parts, fmt.Sprintf("leader in %d of %d", leader, len(ts)))
	}
	if priority > 0 {
		parts = append(parts, fmt.Sprintf("priority node in %d of %d", priority, len(ts)))
	}
	nodes := slices.SortedFunc(maps.Keys(hits), func(a, b string) int { return cmp.Or(cmp.Compare(hits[b], hits[a]), cmp.Compare(a, b)) })
	var ns []string
	for _, n := range nodes[:min(len(nodes), 6)] {
		ns = append(ns, fmt.Sprintf("%s ×%d", n, hits[n]))
	}
	if len(nodes) > 6 {
		ns = append(ns, fmt.Sprintf("+%d more", len(nodes)-6))
	}
	return strings.Join(append(parts, strings.Join(ns, ", ")), "; ")
}
