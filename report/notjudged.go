package report

import (
	"fmt"
	"slices"
	"strings"
)

// applicability is the report's own table of why a fault class cannot
// apply to a backend, used when the run did not record a reason
// (results.File.Skipped). Keys are base backend names; "*" is any
// backend not listed. An absent entry means the class applies, and a
// backend without cases under it was simply not run.
var applicability = map[string]map[string]string{
	"clock-jump": {
		"etcd":      "etcd leases run on the servers' monotonic clocks (TTLs are counted down by the leader, not read off a wall clock), so a wall-clock jump cannot expire them; lockbench's clock-jump emulates a jump by moving Redis key expiries, which has no etcd equivalent",
		"zookeeper": "ZooKeeper sessions expire on the servers' monotonic tick counts, not on wall-clock time, so a wall-clock jump cannot expire them; lockbench's clock-jump emulates a jump by moving Redis key expiries, which has no ZooKeeper equivalent",
		"postgres":  "lockbench's clock-jump emulates a wall-clock jump by moving Redis key expiries; it has no PostgreSQL equivalent",
	},
	"failover": {
		"sentinel": "",
		"*":        "failover is Sentinel promoting a replica that missed the latest locks; this backend has no Sentinel replica set",
	},
	"partition-leader": {
		"etcd": "", "zookeeper": "",
		"*": "the fault cuts a consensus leader from its followers; this backend's servers elect no leader among themselves",
	},
	"partition-halves": {
		"etcd": "", "zookeeper": "",
		"*": "the fault splits the traffic between cluster members; this backend's servers do not talk to one another",
	},
	"leader-kill": {
		"etcd": "", "zookeeper": "", "sentinel": "",
		"*": "this backend's servers elect no leader to kill",
	},
}

// controlReason is why the control faces no server fault.
const controlReason = "the noop control has no servers to fault"

// notJudged returns why a backend has no valid case under a fault class:
// the run's recorded reason, the invalid cases, the report's own table,
// or that the run did not say. It is what the report prints instead of
// a blank, and never a pass.
func (ds *dataset) notJudged(backend, class string) string {
	for _, s := range ds.File.Skipped {
		if s.FaultClass == class && (s.Backend == backend || s.Backend == baseName(backend)) && s.Reason != "" {
			return "not judged: " + s.Reason
		}
	}
	var invalid []string
	for _, c := range ds.Invalid {
		if c.Backend == backend && c.FaultClass == class {
			invalid = appendNew(invalid, orUnset(c.InvalidReason, "no reason recorded"))
		}
	}
	if len(invalid) > 0 {
		return fmt.Sprintf("not judged: every case was invalid (%s)", strings.Join(invalid, "; "))
	}
	if isControl(backend) && class != faultPause {
		return "not judged: " + controlReason
	}
	if byBackend, ok := applicability[class]; ok {
		reason, listed := byBackend[baseName(backend)]
		if !listed {
			reason = byBackend["*"]
		}
		if reason != "" {
			return "not judged: " + reason + " (the report's table; the run recorded no reason)"
		}
	}
	if ds.variantOnly(backend) {
		return "not judged: this variant runs only the faults it exists for"
	}
	return "not judged: not run (the results do not say why)"
}

// variantOnly reports whether a backend is a variant (params in its
// name) that ran no fault-free case: the suites run variants only under
// the faults that make them differ.
func (ds *dataset) variantOnly(backend string) bool {
	return strings.Contains(backend, "?") && len(ds.find(query{Backend: backend, Fault: faultNone})) == 0
}

// notJudgedClasses returns, for a backend, each class some backend of
// the run faced and it did not, with why.
func (ds *dataset) notJudgedClasses(backend string) []string {
	faced := ds.classesOf(backend)
	var out []string
	for _, cls := range ds.Classes {
		if cls == faultNone || slices.Contains(faced, cls) {
			continue
		}
		out = append(out, cls+" — "+ds.notJudged(backend, cls))
	}
	return out
}
