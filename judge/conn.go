package judge

import (
	"context"
	"fmt"

	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/results"
)

// Metrics is what a client measured of its own operations, sent with
// Done: the histograms (µs, encoded as in results) and the errors by
// kind.
type Metrics struct {
	// Info describes the client's backend (locker.Info).
	Info        *locker.Info       `json:"info,omitempty"`
	Acquired    int64              `json:"acquired"`
	Errors      map[string]int64   `json:"errors,omitempty"`
	FirstErrors map[string]string  `json:"first_errors,omitempty"`
	Histograms  results.Histograms `json:"histograms"`
}

// mergeMetrics adds up the metrics of several clients; histograms merge
// without loss. A histogram that does not decode is left out (its client
// sent garbage; the counts still add up).
func mergeMetrics(ms []Metrics) Metrics {
	out := Metrics{Errors: map[string]int64{}, FirstErrors: map[string]string{}}
	var acq, hold, rel []string
	for _, m := range ms {
		if out.Info == nil {
			out.Info = m.Info
		}
		out.Acquired += m.Acquired
		for k, v := range m.Errors {
			out.Errors[k] += v
		}
		for k, v := range m.FirstErrors {
			if _, ok := out.FirstErrors[k]; !ok {
				out.FirstErrors[k] = v
			}
		}
		acq, hold, rel = append(acq, m.Histograms.Acquire), append(hold, m.Histograms.Hold), append(rel, m.Histograms.Release)
	}
	out.Histograms.Acquire, _ = results.MergeEncoded(acq...)
	out.Histograms.Hold, _ = results.MergeEncoded(hold...)
	out.Histograms.Release, _ = results.MergeEncoded(rel...)
	return out
}

// Conn is one client's line to the judge for one case. A client's calls
// are sequential: the judge takes the end of each reply as a lower bound
// of the client's next call.
type Conn interface {
	// Ready says hello and waits at the start barrier until every client
	// of every host is ready.
	Ready(ctx context.Context) (StartInfo, error)
	// Grant reports a lease that Acquire returned, and opens its section.
	// The judge may stop the client's process before it answers (a pause
	// before the first access).
	Grant(ctx context.Context, g GrantReport) (Grant, error)
	// Read is the section's first access: the resource reads the key's
	// counter (each guard's store its own). The judge may stop the
	// client's process before it answers (a pause after the read).
	Read(ctx context.Context, section int64) error
	// Write writes the counter read plus one, in each store whose guard
	// accepts it.
	Write(ctx context.Context, section int64) error
	// End closes the section; the client calls Release after it returns.
	End(ctx context.Context, section int64) error
	// Report records an acquire that did not grant, a release, what the
	// lease told its holder inside an open section (history.LeaseEnd), or
	// an extension of a section's lease (history.Extend).
	Report(ctx context.Context, r OpReport) error
	// Extending says an extension of the lease of the client's section
	// has just begun (its watchdog's): the live view a nemesis aims a
	// pause inside an extension by (Case.AwaitExtending). It records
	// nothing; the extension is reported once it returned.
	Extending(ctx context.Context, section int64) error
	// Done ends the client with its metrics.
	Done(ctx context.Context, m Metrics) error
	// Stopping reports whether the judge has asked the clients to stop.
	Stopping() bool
	// Close drops the connection; a client that did not call Done is
	// then dead.
	Close() error
}

// Local returns the line of an in-process client (a goroutine of the
// runner) to case c: direct calls, one clock.
func (c *Case) Local(host string, process int) Conn {
	return &local{c: c, host: host, process: process}
}

type local struct {
	c       *Case
	host    string
	process int
}

func (l *local) Ready(ctx context.Context) (StartInfo, error) {
	c := l.c
	c.mu.Lock()
	err := c.hello(l.host, l.process, 0)
	c.mu.Unlock()
	if err != nil {
		return StartInfo{}, err
	}
	return awaitStart(ctx, c, l.process)
}

// awaitStart marks process ready and waits for the start barrier.
func awaitStart(ctx context.Context, c *Case, process int) (StartInfo, error) {
	started, err := c.arrive(process)
	if err != nil {
		return StartInfo{}, err
	}
	ctx, stop := c.j.bind(ctx)
	defer stop()
	select {
	case <-started:
	case <-ctx.Done():
		return StartInfo{}, fmt.Errorf("case %s: waiting at the start barrier: %w", c.spec.ID, ended(ctx))
	}
	si, err := c.startInfo()
	if err == nil {
		c.replied(process)
	}
	return si, err
}

func (l *local) Grant(_ context.Context, g GrantReport) (Grant, error) {
	g.ThetaLo, g.ThetaHi = 0, 0
	defer l.c.replied(l.process)
	return l.c.grant(l.process, g)
}

func (l *local) Read(_ context.Context, section int64) error {
	defer l.c.replied(l.process)
	return l.c.read(l.process, section)
}

func (l *local) Write(_ context.Context, section int64) error {
	defer l.c.replied(l.process)
	return l.c.write(l.process, section)
}

func (l *local) End(_ context.Context, section int64) error {
	defer l.c.replied(l.process)
	return l.c.end(l.process, section)
}

func (l *local) Report(_ context.Context, r OpReport) error {
	r.ThetaLo, r.ThetaHi = 0, 0
	defer l.c.replied(l.process)
	return l.c.report(l.process, r)
}

func (l *local) Extending(_ context.Context, section int64) error {
	defer l.c.replied(l.process)
	return l.c.extending(l.process, section)
}

func (l *local) Done(_ context.Context, m Metrics) error {
	l.c.doneWith(l.process, &m, "")
	return nil
}

func (l *local) Stopping() bool {
	l.c.mu.Lock()
	defer l.c.mu.Unlock()
	return l.c.stopping()
}

func (l *local) Close() error {
	l.c.doneWith(l.process, nil, "the client closed its line without Done")
	return nil
}

// Referee is what a runner needs of a judge, in process or across the
// network: join a case, learn when it ends, say when one of its clients
// is gone or the case must stop.
type Referee interface {
	// Open joins host to a case and waits for every host.
	Open(ctx context.Context, host string, spec CaseSpec) (CaseInfo, error)
	// Finish waits for every client of the case and returns the result.
	Finish(ctx context.Context, host, id string) (*Result, error)
	// Gone says a client of the case ended without Done.
	Gone(id string, process int, why string)
	// Stop asks the case's clients to stop after their current section.
	Stop(id string)
	// Addr is where client processes dial the judge.
	Addr() string
	// RunID is the run's id.
	RunID() string
	// Peer connects the nemesis of open case info to the judge, as its
	// peer: the case itself in the judge's process, a RemotePeer (whose
	// connections last until ctx ends) to a judge elsewhere.
	Peer(ctx context.Context, info CaseInfo) (Peer, error)
}

var _ Referee = (*Judge)(nil)

// Gone implements Referee.
func (j *Judge) Gone(id string, process int, why string) {
	if c := j.Case(id); c != nil {
		c.Gone(process, why)
	}
}

// Stop implements Referee.
func (j *Judge) Stop(id string) {
	if c := j.Case(id); c != nil {
		c.Stop()
	}
}
