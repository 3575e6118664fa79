package envelope

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/nemesis"
)

// Family is a fault whose size the search varies: its fault spec without
// the size, the param that sizes it, what a size of 1 is, the range
// searched, and the way the debate says it breaks a lock.
type Family struct {
	// Name names the family in results and charts (client-pause,
	// client-pause-acquire, client-pause-extend, clock-jump,
	// clock-jump-minority, clock-jump-back, clock-rate, restart-delay,
	// partition, split-view, failover).
	Name string
	// Fault is the fault spec the size's param is added to.
	Fault string
	// Param is the param that sizes the fault, in Units of the lock.
	Param string
	// Offset is added to a size to make Param's value: a clock's rate is
	// 1 + the key lifetimes it gains per key lifetime. Zero for the
	// families whose param is their size.
	Offset float64
	// Unit is what a size of 1 is: the lease (pauses) or the key's
	// lifetime on the servers (clock faults, restart delays).
	Unit string
	// Min and Max are the sizes searched.
	Min, Max float64
	// TTL is the lease the cases ask for (a fault raises it to its
	// MinTTL).
	TTL time.Duration
	// LongHolds makes the holders hold three TTLs with leases that extend
	// themselves: a pause inside an Extend needs an extension to land in,
	// and a restart's delay a section still open when the nodes return.
	LongHolds bool
	// Mechanism is the debate's account of how this family breaks a
	// lock, for the report.
	Mechanism string
	// Shrinking is set for a family whose danger shrinks as it grows: past
	// some size the fault outlasts every section it could break and
	// nothing tests, so its search starts from the smallest size.
	Shrinking bool
	// multiNode is set for a family that needs several nodes (a minority
	// is not the whole of one node).
	multiNode bool
}

// families are the families lockbench envelope knows, by the fault name
// --fault takes; a name may stand for several (a clock jump of a majority
// and of a minority).
var families = map[string][]Family{
	"client-pause": {{
		Name: "client-pause", Fault: "client-pause", Param: "x", Unit: "lease", Min: 1.0 / 16, Max: 3, TTL: time.Second,
		Mechanism: "the holder's process was stopped past its lease: the lease expired, another client was granted the key, " +
			"and the holder woke and wrote late (an expired holder, which only a fencing token stops); " +
			"a lock bug here would be a grant inside the lease the lock promised",
	}},
	"client-pause-acquire": {{
		Name: "client-pause-acquire", Fault: "client-pause?at=acquire", Param: "x", Unit: "lease", Min: 1.0 / 16, Max: 3,
		TTL: time.Second,
		Mechanism: "a client's process was stopped inside Acquire, while it waited or after the servers granted it and before Acquire " +
			"returned: a lock that checks the time its grant took (Redlock's validity) refuses a grant that outlived its lease, " +
			"one that does not returns it expired, and its holder, told it holds the key, enters its section after another client " +
			"was granted it",
	}},
	"client-pause-extend": {{
		Name: "client-pause-extend", Fault: "client-pause?at=extend", Param: "x", Unit: "lease", Min: 1.0 / 16, Max: 3,
		TTL: time.Second, LongHolds: true,
		Mechanism: "a holder of three TTLs, its lease extending itself, was stopped while an extension was in flight: past its " +
			"lease, the key expired and another client was granted it; a lock bug is an extension that kept the key for the " +
			"paused holder after that grant (an extension granted without checking that the lease was still its own), " +
			"a late write one its holder made before its lease told it the key was gone",
	}},
	"restart-delay": {{
		Name: "restart-delay", Fault: "power-loss", Param: "delay", Unit: "key lifetime", Min: 1.0 / 16, Max: 2,
		TTL: 2 * time.Second, LongHolds: true, Shrinking: true,
		Mechanism: "a majority of the nodes lost power (their unsynced writes with it) while a holder of three TTLs held, its " +
			"lease extending itself, and started again after the delay: a lock whose restarted nodes grant the key at once " +
			"grants it inside the holder's lease unless the delay outlasts that lease (antirez's delayed restart); one whose " +
			"restarted nodes refuse for a max TTL (Redlock's quarantine) waits whatever the delay",
	}},
	"partition": {{
		Name: "partition", Fault: "partition", Param: "x", Unit: "lease", Min: 1.0 / 2, Max: 4, TTL: 2 * time.Second,
		LongHolds: true,
		Mechanism: "every client was cut off from a minority of the nodes (from the single server, a Sentinel set's master) while a " +
			"holder of three TTLs held, its lease extending itself: a majority lock goes on extending on the nodes it still reaches, " +
			"so nobody else is granted the key; a lock on one server cannot extend past the cut, its lease ends a lease after " +
			"its last extension and its key on the server with it, so a late write is one its holder made after its lease " +
			"told it the key was gone, and a lock bug a grant inside the lease it was promised",
	}},
	"split-view": {{
		Name: "split-view", Fault: "split-view", Param: "x", Unit: "lease", Min: 1.0 / 2, Max: 4, TTL: 2 * time.Second,
		LongHolds: true,
		Mechanism: "two clients saw different majorities of the nodes (of 5, {0,1,2} and {2,3,4}; of 3, {0,1} and {1,2}) for the " +
			"size's leases while a holder of three TTLs held, its lease extending itself: the two majorities share a node, which " +
			"keeps the holder's key while the holder can extend it there, so a majority lock grants the other client nothing; " +
			"a lock bug is a second majority gathered while the first holder's lease runs (the shared node's key forgotten or " +
			"handed over), a late write one the holder made after its lease ended",
		multiNode: true,
	}},
	"failover": {{
		Name: "failover", Fault: "failover", Param: "x", Unit: "lease", Min: 1.0 / 16, Max: 2, TTL: 10 * time.Second, Shrinking: true,
		Mechanism: "replication to the replicas was cut, and the master died with sections granted on it alone, held for nine " +
			"tenths of their lease; the sentinels waited the size's leases (down-after) before they promoted a replica that never " +
			"saw those sections: once it serves, it grants their keys again, a lock bug while such a section is open, and none " +
			"once the failover outlasts what is left of the section",
	}},
	"clock-jump": {{
		Name: "clock-jump", Fault: "clock-jump?nodes=majority", Param: "by", Unit: "key lifetime", Min: 1.0 / 16, Max: 2, TTL: 2 * time.Second,
		Mechanism: "the servers' wall clock jumped forward while a holder held: a key timed by that clock expired early, " +
			"and another client was granted it inside the holder's lease",
	}, {
		Name: "clock-jump-minority", Fault: "clock-jump?nodes=minority", Param: "by", Unit: "key lifetime",
		Min: 1.0 / 16, Max: 2, TTL: 2 * time.Second,
		Mechanism: "a minority's wall clock jumped forward: its keys expired early; a majority lock should still hold, " +
			"since a new grant needs a majority and the jumped minority alone is not one",
		multiNode: true,
	}},
	"clock-jump-back": {{
		Name: "clock-jump-back", Fault: "clock-jump?back=1&nodes=majority", Param: "by", Unit: "key lifetime",
		Min: 1.0 / 16, Max: 2, TTL: 2 * time.Second,
		Mechanism: "the servers' wall clock jumped back while a holder held: a key timed by that clock outlives its TTL by the " +
			"jump, so nobody is granted it early; what a backward step costs is the key's availability after a holder that " +
			"stops renewing it, not exclusion",
	}},
	"clock-rate": {{
		Name: "clock-rate", Fault: "clock-rate?nodes=majority", Param: "rate", Offset: 1, Unit: "key lifetime",
		Min: 1.0 / 16, Max: 2, TTL: 2 * time.Second,
		Mechanism: "the servers' wall clock ran fast, gaining the size's key lifetimes per key lifetime, for a lease (at least a " +
			"second) while a holder held its section for three quarters of its TTL: a key timed by that clock expired before the " +
			"section ended once the clock gained a third, and another client was granted it; a lock whose leases count down on a " +
			"monotonic clock is not reached",
	}},
}

// Names are the fault names Families takes.
func Names() []string {
	return []string{"client-pause", "client-pause-acquire", "client-pause-extend", "clock-jump", "clock-jump-back", "clock-rate",
		"restart-delay", "partition", "split-view", "failover"}
}

// Families returns the families of the fault names given, for backend b:
// a family that needs several nodes is left out for a lock on one.
func Families(names []string, b bench.Backend) ([]Family, error) {
	var out []Family
	for _, n := range names {
		fs, ok := families[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("%w: envelope fault %q: want one of %v", bench.ErrConfig, n, Names())
		}
		for _, f := range fs {
			if f.multiNode && bench.Shape(b).Nodes < 3 {
				continue
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// Resolution is the ratio between neighbouring sizes of every search's
// grid: a boundary is found to within 2^¼ ≈ 1.19 of its size.
var Resolution = math.Pow(2, 0.25)

// spec is the family's fault at size.
func (f Family) spec(size float64) string {
	sep := "?"
	if strings.Contains(f.Fault, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%s%s=%g", f.Fault, sep, f.Param, f.Offset+size)
}

// probeOverhead is what a probe costs besides its case: servers started
// or repaired, worker processes, the judge's checks.
const probeOverhead = 5 * time.Second

// probeCost is what one probe of n injections of the family costs on
// backend b at most: its case at the largest size, as the runner
// stretches it, and the probe's overhead.
func (f Family) probeCost(b bench.Backend, n int) time.Duration {
	fault, err := nemesis.Parse(f.spec(f.Max))
	if err != nil {
		return probeOverhead // TestFamiliesSizeTheirFault parses every family at its ends
	}
	spec, _ := f.load(fault, 2)
	d := max(spec.Duration, fault.MinDuration(bench.Shape(b), bench.Lease(b, max(f.TTL, fault.MinTTL)), n))
	return d + probeOverhead
}

// fits says why the family's fault cannot strike backend b's servers
// here (etcd's leases on a monotonic clock, a clock preload missing), or
// "".
func (f Family) fits(b bench.Backend) string {
	fault, err := nemesis.Parse(f.spec(1))
	if err != nil {
		return err.Error()
	}
	if err := fault.Fits(bench.Shape(b)); err != nil {
		return err.Error()
	}
	return ""
}
