// Package workloads is lockbench's generator and client: what each client
// does and when, the loop that does it against one locker.Locker, and
// the measuring decorator around that Locker. In Jepsen's terms it is the
// generator and the client; the judge (package judge) is the checker,
// the nemesis (package nemesis) breaks things beside it, and the runner
// (package bench) composes the three for each case.
//
//   - Spec describes a load: the keys (one hot key, uniform or zipf over
//     Keys), the clients, a closed loop or an open loop at a target rate,
//     hold and think time distributions (Dist), the TTL, and the bounds
//     (Duration, MaxOps). A bad one is refused with an error wrapping
//     ErrSpec that names the value.
//   - Run drives clients (goroutines of this process, each with its own
//     Locker and its own line to the judge, a judge.Conn): each waits at
//     the judge's start barrier, then acquires, reports the grant, reads
//     and writes the judge's resource inside its section, has the end
//     acknowledged and releases, until the case ends. A worker process
//     runs one client; the runner's goroutine cases run several.
//   - Measure wraps a Locker in a decorator that records acquire wait,
//     hold time and release latency into HDR histograms, and failures by
//     kind (Classify), so no backend carries metrics code; the clients
//     send them to the judge at the end.
//   - Outcome is what a case measured — the judge's result, the nemesis's
//     record of its injections, how the clients ran — and Fill turns it
//     into a results.Case per guard.
//
// The package depends on locker, judge, history, results and stats;
// backends and compose appear in its tests alone.
package workloads
