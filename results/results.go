// Package results is the schema of results.json, the contract between the
// workloads that measure and the report that renders: one Case per
// measured combination of backend, workload, fault and settings, with its
// counts, its latency percentiles and the HDR histograms they come from,
// so that runs from several load-generator hosts merge without loss.
package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Version is the schema version this package writes.
const Version = 1

// File is the content of results.json.
type File struct {
	Version  int       `json:"version"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Hosts are the load generators whose cases this file holds.
	Hosts []string `json:"hosts"`
	// Machine describes where the run happened ("2 cores, linux/amd64").
	Machine string `json:"machine"`
	// Command is the command line that produced the run.
	Command string `json:"command,omitempty"`
	// Partial is set when the run was interrupted before every case ran.
	Partial bool `json:"partial,omitempty"`
	// RunID names the run on the judge: every host and worker of the run
	// shares it, and the key names of its cases start with it.
	RunID string `json:"run_id,omitempty"`
	// Seed is the seed every random choice of the run derives from (keys,
	// hold times, fault targets, fault times): lockbench run --seed
	// replays the run's schedule.
	Seed uint64 `json:"seed"`
	// Suite names the predefined suite that ran ("default", "quick"), or
	// is empty for a matrix given by flags.
	Suite string `json:"suite,omitempty"`
	// Cores and MemoryBytes describe the machine of the run.
	Cores       int   `json:"cores,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Versions are the versions of lockbench and of every server the run
	// started ("lockbench", "go", "redis-server", "zookeeper", "etcd",
	// "postgres").
	Versions map[string]string `json:"versions,omitempty"`
	Cases    []Case            `json:"cases"`
	// Skipped lists the fault classes the run did not put a backend
	// through, each with why (the class cannot apply to the backend, the
	// suite left it out): the report says "not judged" with the reason
	// rather than leave a blank, and never reads a skipped class as a pass.
	Skipped []Skip `json:"skipped,omitempty"`
	// Profile is the service the run answers for (lockbench advise); nil
	// for a run without one, answered as for a zero Profile.
	Profile *Profile `json:"profile,omitempty"`
	// Answer is the decision on the run's evidence (package answer);
	// nil until a decision was made.
	Answer *Answer `json:"answer,omitempty"`
	// Envelopes are where each lock broke against a fault's size
	// (lockbench envelope); see Envelope.
	Envelopes []Envelope `json:"envelopes,omitempty"`
}

// Skip is one fault class the run did not put one backend through.
type Skip struct {
	Backend    string `json:"backend"`
	FaultClass string `json:"fault_class"`
	// Reason says why, in a sentence a reader of the report understands
	// ("etcd leases run on the server's monotonic clock: a wall-clock jump
	// cannot expire them").
	Reason string `json:"reason"`
	// Cut is set when the case was planned and applies, but the run
	// stopped (its budget ran out, or it was interrupted) before it ran:
	// what it would have shown is unknown, not inapplicable. Fault is
	// then the case's fault spec (client-pause?at=extend), which tells
	// its variant from the others of its class.
	Cut   bool   `json:"cut,omitempty"`
	Fault string `json:"fault,omitempty"`
	// ServerKind is the server software of the backend's servers (as
	// Case.ServerKind), set on a case cut: a candidate none of whose cases
	// ran is still known to run on servers the team has or would add.
	ServerKind string `json:"server_kind,omitempty"`
}

// Case is one measured combination: a backend under a workload and a
// fault, with a guard mode and a number of clients, for one trial.
type Case struct {
	Backend  string `json:"backend"`
	Workload string `json:"workload"`
	Fault    string `json:"fault"`
	// Fencing reports whether the resource checked fencing tokens (Guard
	// "fence").
	Fencing bool `json:"fencing"`
	// Guard is the resource's guard mode: "none", "fence" or "cas".
	Guard   string `json:"guard"`
	Clients int    `json:"clients"`
	Trial   int    `json:"trial"`
	// Host is the load generator that measured the case.
	Host string `json:"host,omitempty"`
	// ServerKind is the server software the backend's servers run
	// (redis, sentinel, zookeeper, etcd, postgres; empty for none), as
	// its descriptor declares it: the answer says which candidates a team
	// already runs (Profile.Have) without knowing backends by name.
	ServerKind string `json:"server_kind,omitempty"`
	// FaultClass is the fault's catalogue name without its params
	// ("client-pause" for "client-pause?x=1.5"): backends are compared on
	// the classes they all faced.
	FaultClass string `json:"fault_class,omitempty"`
	// ClientsAs says how the clients ran: ClientsProcesses (a worker
	// process each, which a pause freezes whole) or ClientsGoroutines
	// (goroutines of the runner, for throughput cases).
	ClientsAs string `json:"clients_as,omitempty"`
	// Durability is the servers' durability profile: DurabilityFast (no
	// fsync), DurabilityPeriodic (a sync in the background, about once a
	// second) or DurabilityDurable (every write synced); empty for a
	// backend without servers.
	Durability string `json:"durability,omitempty"`
	// Seed is the case's own seed, derived from the run's.
	Seed uint64 `json:"seed,omitempty"`
	// FreshServers is set when the case's servers were started for this
	// trial alone, so that its trials are independent samples; without
	// it the trials of a combination ran one after another on the same
	// servers, and the report treats them as one trial where
	// independence matters (the spread that calls one backend faster).
	FreshServers bool `json:"fresh_servers,omitempty"`

	// Settings.
	Keys int `json:"keys"`
	// Hold is the hold-time distribution as the CLI writes it (2ms,
	// 1ms-5ms, exp:2ms).
	Hold string `json:"hold,omitempty"`
	// Load names how the holders held beyond a drawn time, for the loads
	// that provoke a lease's accounting: LoadValidity (each held a random
	// fraction, up to HoldLeft, of the validity its lease had left after
	// its first access), LoadAutoExtend (the lease's own watchdog extended
	// it while its holder held), both joined by "+"; empty for plain
	// holds. It is part of the case's Key.
	Load     string  `json:"load,omitempty"`
	HoldLeft float64 `json:"hold_left,omitempty"`
	// HoldForMS is, for a long-hold load (LoadLongHold), how long each
	// holder held after its first access, whatever its lease said.
	HoldForMS  int64   `json:"hold_for_ms,omitempty"`
	TTLMillis  int64   `json:"ttl_ms"`
	DurationS  float64 `json:"duration_s"`  // how long the load ran
	TargetRate float64 `json:"target_rate"` // grants/s asked by an open loop; 0 for a closed loop

	// Backend facts, from locker.Info.
	Nodes     int    `json:"nodes"`
	Quorum    int    `json:"quorum"`
	Guarantee string `json:"guarantee,omitempty"`
	// Control is set for a backend that excludes nobody (its descriptor
	// says so): it runs to prove that the checkers see violations, and no
	// recommendation picks it.
	Control bool `json:"control,omitempty"`
	// PromiseMS is the lock's contract for the case's grants: how long
	// after the call of Acquire nobody else may be granted the key (ms),
	// as the backend declares it (locker.Info.Promise of the TTL: the TTL
	// less the declared drift, or the session timeout); the checkers draw
	// the line between a lock bug and an expired holder there, not at the
	// ValidUntil a lease reported. 0 when the backend declared none.
	// MaxValidityMS is the longest the lock can keep a key from a grant
	// (locker.Info.MaxValidity): a lease reporting more departs from its
	// contract.
	PromiseMS     float64 `json:"promise_ms,omitempty"`
	MaxValidityMS float64 `json:"max_validity_ms,omitempty"`
	// Contract, when set, is the contract the backend's descriptor
	// declares for the case's TTL and params, which the checkers judged
	// its grants by instead of the promise each worker reported; nil when
	// the backend declares none (the workers' report stands, as
	// PromiseMS). PromiseDepartures counts the grants and extensions
	// whose worker reported another promise: a finding lockbench check
	// fails on.
	Contract          *Contract `json:"contract,omitempty"`
	PromiseDepartures int64     `json:"promise_departures,omitempty"`

	// Measurements.
	Acquired   int64            `json:"acquired"`
	Throughput float64          `json:"throughput"` // grants per second
	LatencyUS  Percentiles      `json:"latency_us"` // acquire wait
	HoldUS     Percentiles      `json:"hold_us"`
	ReleaseUS  Percentiles      `json:"release_us"`
	Errors     map[string]int64 `json:"errors"` // by kind, see the Err* constants

	// Safety.
	Overlaps         int64 `json:"overlaps"`
	StaleAccepted    int64 `json:"stale_accepted"`
	StaleRejected    int64 `json:"stale_rejected"`
	LostUpdates      int64 `json:"lost_updates"`
	TokenRegressions int64 `json:"token_regressions"`
	// OverlapsLockBug counts overlapping sections granted, for certain,
	// before the previous grant's contract line (its call plus PromiseMS):
	// the lock granted a key it had promised; OverlapsExpiredHolder those
	// granted, for certain, after it (the previous holder went on after
	// its lease had ended: what fencing is for); OverlapsAmbiguous those
	// the clock bounds of the judge cannot place on either side. They add
	// up to Overlaps.
	OverlapsLockBug       int64 `json:"overlaps_lock_bug"`
	OverlapsExpiredHolder int64 `json:"overlaps_expired_holder"`
	OverlapsAmbiguous     int64 `json:"overlaps_ambiguous"`
	// AmbiguousWidthMaxMS is the widest uncertainty of an overlap the
	// clock bounds left undecided (the span the contract line may lie in
	// and the span the later grant may have returned in, together), and
	// RoundTripMS the history's median round trip to the judge; an
	// undecided overlap wider than two of those counts against the lock,
	// as a lock bug, and OverlapsAmbiguousWide counts those
	// (history.Report).
	AmbiguousWidthMaxMS   float64 `json:"ambiguous_width_max_ms,omitempty"`
	RoundTripMS           float64 `json:"round_trip_ms,omitempty"`
	OverlapsAmbiguousWide int64   `json:"overlaps_ambiguous_wide,omitempty"`
	// Incidents counts distinct episodes of two or more holders of a key
	// (overlapping sections chained into one episode), classified like the
	// overlaps by their worst overlap: a lock bug when any is, else
	// ambiguous when any is, else an expired holder. Sections grow with
	// throughput; incidents grow with failures.
	Incidents              int64 `json:"incidents"`
	IncidentsLockBug       int64 `json:"incidents_lock_bug"`
	IncidentsExpiredHolder int64 `json:"incidents_expired_holder"`
	IncidentsAmbiguous     int64 `json:"incidents_ambiguous"`
	// LeaseEnds counts the sections whose lease told its holder it had
	// ended (expired, lost, or past its ValidUntil) before the holder was
	// done. StaleTold and StaleSilent split the stale writes, accepted
	// and rejected: made after the holder's lease had told it so (the
	// lock revoked the lease and told its holder in time: a careful
	// client holds back), or with its lease saying nothing (silent: only
	// a fencing resource stops them).
	LeaseEnds   int64 `json:"lease_ends"`
	StaleTold   int64 `json:"stale_told"`
	StaleSilent int64 `json:"stale_silent"`
	// ContendedGrants counts the grants made while another client's
	// acquire of the same key was in progress: the grants at which a
	// double grant could show, and the trials of a fault-free rate.
	ContendedGrants int64 `json:"contended_grants"`
	// ValidityShort and ValidityLong count the grants whose lease
	// reported a ValidUntil outside its contract: before the call plus
	// PromiseMS (the lease claimed less than the lock promised, which a
	// line drawn by the lease would turn into expired holders), or after
	// the return plus MaxValidityMS (it claimed more than the lock can
	// give: a holder trusting it writes past the line). ValidityShortMaxMS and
	// ValidityLongMaxMS are the largest departures.
	ValidityShort      int64   `json:"validity_short"`
	ValidityLong       int64   `json:"validity_long"`
	ValidityShortMaxMS float64 `json:"validity_short_max_ms,omitempty"`
	ValidityLongMaxMS  float64 `json:"validity_long_max_ms,omitempty"`
	// Extends counts the extensions of the sections' leases (their
	// auto-extend watchdog's), ExtendsFailed those the lock refused (the
	// key was no longer the lease's) or whose outcome is unknown, but for
	// those that returned after their holder began to release (a watchdog
	// that raced its holder's release says nothing of the lock). An ok
	// extension moves its section's contract line: a grant before the new
	// line is a lock bug. The validity departures count extensions too.
	Extends       int64 `json:"extends,omitempty"`
	ExtendsFailed int64 `json:"extends_failed,omitempty"`
	// PausesLanded counts the pauses of client processes by the point of
	// their client's cycle they landed at (acquire, before-read,
	// after-read, after-write, release, idle, unknown; plus extend for
	// those that caught an extension in flight, which also count at their
	// point); each Target of a client pause says where it was aimed and
	// where it landed.
	PausesLanded map[string]int `json:"pauses_landed,omitempty"`
	// Linearizable is porcupine's verdict on the history against a mutex
	// model per key; LinearizableFenced against a fenced-mutex model
	// (grants' tokens strictly increase in real-time order, overlaps
	// allowed). Each is true, false or "unknown"; the reasons say why a
	// verdict is unknown or false.
	Linearizable             Verdict `json:"linearizable"`
	LinearizableReason       string  `json:"linearizable_reason,omitempty"`
	LinearizableFenced       Verdict `json:"linearizable_fenced"`
	LinearizableFencedReason string  `json:"linearizable_fenced_reason,omitempty"`
	// History is the path, relative to the run dir, of the case's
	// operation history (lockbench check re-checks it).
	History string `json:"history,omitempty"`

	// Faults. Injections counts the times the fault was injected (0 for
	// fault "none"); Targets says what each injection hit, whether it
	// tested anything, and what followed it.
	Injections int      `json:"injections"`
	Targets    []Target `json:"targets,omitempty"`
	// InjectionsTested counts the injections that tested what their
	// class is meant to test (Target.Tested): only they enter a rate or a
	// bound. Nil when the run did not judge its injections (results from
	// before the field): every injection then counts, and the report
	// says so.
	InjectionsTested *int `json:"injections_tested,omitempty"`
	// IncidentRateUpper95 is the one-sided 95% upper bound on the rate
	// of tested injections followed by at least one incident (exact
	// binomial, Clopper–Pearson); 0 without injections.
	IncidentRateUpper95 float64 `json:"incident_rate_upper95"`
	// Invalid is set when the fault failed to inject as planned: the case
	// did not measure what its name promises and no conclusion uses it.
	// InvalidReason says what went wrong.
	Invalid       bool   `json:"invalid,omitempty"`
	InvalidReason string `json:"invalid_reason,omitempty"`
	// Availability measures the service inside the fault windows and the
	// recovery after them; nil without fault windows.
	Availability *Availability `json:"availability,omitempty"`

	// Timeline is the number of grants in each TimelineStepS-second
	// interval from the start of the case.
	TimelineStepS float64  `json:"timeline_step_s"`
	Timeline      []int64  `json:"timeline"`
	FaultWindows  []Window `json:"fault_windows"`

	// Histograms are the HDR histograms (µs) behind the percentiles.
	Histograms Histograms `json:"histograms"`

	// Notes explain the case: why a fault did not apply, why a result
	// differs from what theory predicts.
	Notes []string `json:"notes,omitempty"`
}

// How a case's clients ran (Case.ClientsAs).
const (
	ClientsProcesses  = "processes"
	ClientsGoroutines = "goroutines"
)

// The loads that provoke a lease's accounting (Case.Load).
const (
	LoadValidity   = "validity"
	LoadAutoExtend = "auto-extend"
	// LoadLongHold: each holder held a set time (Case.HoldForMS),
	// usually several TTLs under LoadAutoExtend.
	LoadLongHold = "long-hold"
)

// The durability profiles (Case.Durability).
const (
	// DurabilityFast: no fsync (Redis without persistence, etcd with
	// --unsafe-no-fsync, ZooKeeper forceSync=no, PostgreSQL fsync=off).
	DurabilityFast = "fast"
	// DurabilityPeriodic: a sync in the background (Redis appendfsync
	// everysec, PostgreSQL synchronous_commit=off with fsync on); ZooKeeper
	// and etcd have no such mode.
	DurabilityPeriodic = "periodic"
	// DurabilityDurable: every write synced before it is acknowledged
	// (Redis AOF appendfsync always, etcd and ZooKeeper with fsync,
	// PostgreSQL fsync and synchronous_commit on).
	DurabilityDurable = "durable"
)

// Availability is how a backend served while faults were in effect.
type Availability struct {
	// BaselineThroughput is grants/s before the first fault window.
	BaselineThroughput float64 `json:"baseline_throughput"`
	// InFaultThroughput is grants/s inside the fault windows.
	InFaultThroughput float64 `json:"in_fault_throughput"`
	// WindowThroughput is grants/s inside each fault window, in order:
	// one sample per injection.
	WindowThroughput []float64 `json:"window_throughput,omitempty"`
	// InFaultP99US is the acquire p99 of the operations that began inside
	// a fault window (µs); 0 when none completed.
	InFaultP99US int64 `json:"in_fault_p99_us"`
	// RecoveryS is, per window, the seconds from its end until grants ran
	// again at half the baseline rate; -1 when they did not before the
	// case ended.
	RecoveryS []float64 `json:"recovery_s,omitempty"`
}

// The error kinds of Case.Errors.
const (
	ErrNotAcquired = "not_acquired" // the backend refused: held, or no quorum
	ErrNode        = "node"         // a node could not be reached
	ErrLost        = "lost"         // a lease ended by loss while held
	ErrTimeout     = "timeout"      // an acquire ran out of its deadline
	ErrOther       = "other"
)

// Window is a time span, in seconds from the start of the case, during
// which a fault was in effect.
type Window struct {
	Label  string  `json:"label"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
}

// Key identifies the combination a case measures, without its trial and
// host: cases with equal keys are repetitions of one another. The
// durability profile is part of it when set ("…|16|durable"), since a
// restart under the fast and the durable profile are different
// experiments, and so is the load ("…|16|fast|validity"); files without
// them keep their keys.
func (c *Case) Key() string {
	k := fmt.Sprintf("%s|%s|%s|%s|%d", c.Backend, c.Workload, c.Fault, c.Guard, c.Clients)
	if c.Durability != "" {
		k += "|" + c.Durability
	}
	if c.Load != "" {
		k += "|" + c.Load
	}
	if c.HoldForMS > 0 {
		k += fmt.Sprintf("=%dms", c.HoldForMS)
	}
	return k
}

// Read loads a results file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("%s: schema version %d, this lockbench reads %d", path, f.Version, Version)
	}
	for _, e := range f.Envelopes {
		if err := e.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return &f, nil
}

// Write stores f at path atomically (a temporary file renamed into
// place), so an interrupted run never leaves half a file.
func Write(path string, f *File) error {
	f.Version = Version
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".results-*.json")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Contract is a backend's declared contract for one case's grants.
type Contract struct {
	// PromiseNS and MaxValidityNS are locker.Info's Promise and
	// MaxValidity of the case's TTL, in ns.
	PromiseNS     int64 `json:"promise_ns"`
	MaxValidityNS int64 `json:"max_validity_ns"`
	// DriftRate and DriftMS are the drift the lock takes off the TTL
	// (locker.Info's DriftRate and Drift).
	DriftRate float64 `json:"drift_rate,omitempty"`
	DriftMS   float64 `json:"drift_ms,omitempty"`
}
