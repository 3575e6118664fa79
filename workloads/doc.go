// Package workloads is lockbench's load generator and safety checker: it
// puts the same load on every lock backend, measures it, and counts the
// safety violations the Redlock debate is about, so that the debate is
// settled by measurements.
//
//   - Spec describes a load: the keys (one hot key, uniform or zipf over
//     Keys), the clients, a closed loop or an open loop at a target rate,
//     hold and think time distributions (Dist), the TTL, and the bounds
//     (Duration, MaxOps).
//   - Measure wraps a locker.Locker in a decorator that records acquire
//     wait, hold time and release latency into HDR histograms, grants over
//     time and failures by kind (Classify), so no backend carries metrics
//     code.
//   - Resource is the shared resource every critical section reads and
//     writes, guarded by none, a fencing token (GuardFence, Kleppmann) or
//     a compare-and-set mark (GuardCAS, antirez); it is also the checker
//     that counts overlaps, stale writes accepted and rejected, lost
//     updates and token regressions (defined exactly on Resource).
//   - Run drives the clients and returns an Outcome, which fills a
//     results.Case. Hooks let fault scenarios stall chosen critical
//     sections (Kleppmann's GC pause) and record fault windows relative
//     to the run's start.
//
// The package depends on locker and results only; backends and compose
// appear in its tests alone.
package workloads
