package envelope

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/results"
	"github.com/lockbench/lockbench/worker"
)

// Options are an envelope run's settings.
type Options struct {
	Clusters *bench.Clusters
	Worker   worker.Command
	Backends []bench.Backend
	// Faults are the fault names (Names) whose families are searched.
	Faults []string
	// Guards judge each probe; late writes are searched under the first.
	Guards []judge.Guard
	// N and SafeN are the tested injections per probe and at a safe end.
	N, SafeN int
	Clients  int
	// Budget is the whole run's time: each search gets a share of what is
	// left when it starts, in proportion to what one of its probes costs
	// among the searches still to run, so a search that ends early leaves
	// its time to the next.
	Budget time.Duration
	Seed   uint64
	Dir    string
	// Log, if set, gets a line per probe and per search.
	Log io.Writer
}

// Run searches every backend's families and returns their envelopes and
// the cases the probes measured.
func Run(ctx context.Context, o Options) ([]results.Envelope, []results.Case, error) {
	type job struct {
		b bench.Backend
		f Family
	}
	var jobs []job
	for _, b := range o.Backends {
		fs, err := Families(o.Faults, b)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range fs {
			jobs = append(jobs, job{b, f})
		}
	}
	// Searches whose fault cannot strike the lock here take no share of
	// the budget; the others share it by what one probe of theirs costs,
	// so that a search whose cases run a minute (a delayed restart, a
	// failover) gets the probes a pause's search of seconds gets.
	weight := make([]time.Duration, len(jobs))
	var left time.Duration // the weight of the searches still to run
	for i, j := range jobs {
		if j.f.fits(j.b) == "" {
			weight[i] = j.f.probeCost(j.b, o.N)
			left += weight[i]
		}
	}
	if len(jobs) == 0 {
		return nil, nil, fmt.Errorf("%w: no backend and family to search", bench.ErrConfig)
	}
	end := time.Now().Add(o.Budget)
	events := []string{results.EventLockBug}
	if len(o.Guards) > 0 {
		events = append(events, results.LateWriteEvent(string(o.Guards[0])))
	}
	var envs []results.Envelope
	var all []results.Case
	for i, j := range jobs {
		share := time.Duration(float64(time.Until(end)) * float64(weight[i]) / float64(max(left, 1)))
		c := &Cases{Clusters: o.Clusters, Worker: o.Worker, Backend: j.b, Family: j.f, Guards: o.Guards, Clients: o.Clients,
			Dir: o.Dir, Sub: fmt.Sprintf("%02d-%s-%s", i, sanitize(j.b.Spec), j.f.Name), Deadline: time.Now().Add(share)}
		lease := bench.Lease(j.b, j.f.TTL)
		if j.f.Unit != "lease" {
			lease = max(bench.KeyLife(j.b, j.f.TTL), j.f.TTL)
		}
		env := results.Envelope{Backend: j.b.Spec, Family: j.f.Name, Fault: j.f.Fault, Param: j.f.Param, Offset: j.f.Offset, Unit: j.f.Unit,
			Mechanism: j.f.Mechanism, LeaseMS: float64(lease) / float64(time.Millisecond), MinSize: j.f.Min, MaxSize: j.f.Max,
			Resolution: Resolution}
		if why := j.f.fits(j.b); why != "" {
			logf(o.Log, "envelope: %s %s: not applicable: %s", j.b.Spec, j.f.Name, why)
			env.Notes = []string{"not applicable: " + why}
			envs = append(envs, env)
			continue
		}
		left -= weight[i]
		logf(o.Log, "envelope: %s %s: searching %g–%g %ss (%v) for %v", j.b.Spec, j.f.Name, j.f.Min, j.f.Max, j.f.Unit, lease,
			share.Round(time.Second))
		s := Search{Min: j.f.Min, Max: j.f.Max, Resolution: Resolution, N: o.N, SafeN: o.SafeN, Events: events, Seed: o.Seed + uint64(i)*1000003,
			FromBelow: j.f.Shrinking}
		res, err := s.Run(ctx, logged{c, o.Log, j.b.Spec + " " + j.f.Name})
		all = append(all, c.Results...)
		if err != nil {
			return envs, all, err
		}
		env.Points, env.Boundaries, env.Edge, env.Notes = res.Points, res.Boundaries, res.Edge, res.Notes
		for _, b := range env.Boundaries {
			logf(o.Log, "envelope: %s %s: %s", j.b.Spec, j.f.Name, b.Describe(j.f.Unit))
		}
		if env.Edge != nil {
			logf(o.Log, "envelope: %s %s: %s", j.b.Spec, j.f.Name, env.Edge.Describe(j.f.Unit))
		}
		envs = append(envs, env)
	}
	return envs, all, nil
}

// logged logs each probe of a search.
type logged struct {
	p   Prober
	w   io.Writer
	who string
}

func (l logged) Probe(ctx context.Context, size float64, n int, seed uint64) (results.EnvelopePoint, error) {
	start := time.Now()
	pt, err := l.p.Probe(ctx, size, n, seed)
	if err != ErrBudget {
		logf(l.w, "envelope: %s at %g: %d lock bugs, late writes %v, in %d tested of %d injections (%v)%s",
			l.who, size, pt.LockBugs, pt.LateWrites, pt.Tested, pt.Injections, time.Since(start).Round(time.Second), errNote(err))
	}
	return pt, err
}

func errNote(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// sanitize makes a backend spec a file name.
func sanitize(s string) string {
	return strings.NewReplacer("?", "_", "&", "_", "=", "-", "/", "_").Replace(s)
}
