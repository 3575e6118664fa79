package nemesis

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/workloads"
)

// The danger window of a fault that may cost an open section its lock (a
// failover, a majority's restart, crash or power loss, a minority's
// crash): the fault tests exclusion only if, while such a section is
// still open, another client asks for its key, or is granted it, from the
// servers the fault left. A section that ended first — recovery outlasted
// it, the clients had not reached the new master — lost nothing anybody
// could take, and the injection tested nothing.

// danger is what reachedWhileOpen waits for, and how it says why not.
type danger struct {
	// lost are the sections the fault may have cost their lock.
	lost map[int64]bool
	// granted says that the lock granted what the danger needs since the
	// fault (the key again, or anything, from the servers it left).
	granted func(judge.Live) bool
	// asked, when set, says which other client than the lost sections'
	// holders is asking for their key, of the clients in Acquire
	// (acquiring), "" when none.
	asked func(open []judge.OpenSection, acquiring map[int]time.Duration) string
	// from, when set, is the first look: the judge's view, and the
	// clients in Acquire, at the strike of a fault whose nodes stay down
	// (its danger begins at the strike, not after a recovery).
	from *look
	// serving, when set, says whether the servers the fault brought down
	// serve again: a client asking before then asks servers that are
	// down, which reaches no danger (a grant does, whenever it comes).
	serving func() bool
	// raced, ended and late say why not: the sections ended within one
	// look of a grant, before anything was granted (or asked), or the case
	// ended first; gone, when set, says it for sections already ended at
	// the first look.
	raced, ended, late, gone string
}

// look is the judge's view at one moment, with the clients in Acquire.
type look struct {
	live      judge.Live
	acquiring map[int]time.Duration
}

// lookNow is nm's look now.
func lookNow(nm *Nemesis) look { return look{live: nm.live(), acquiring: nm.acquiring()} }

// reachedWhileOpen waits until d's danger is reached — a grant, or a
// client asking, while one of the lost sections is still open — and
// reports whether it was, and how (or why not).
func reachedWhileOpen(ctx context.Context, nm *Nemesis, d danger) (bool, string) {
	tick := time.NewTicker(20 * time.Millisecond) // polling the judge's live view
	defer tick.Stop()
	for first := true; ; first = false {
		now := d.from
		if !first || now == nil {
			x := lookNow(nm)
			now = &x
		}
		l := now.live
		var open []judge.OpenSection
		for _, o := range l.Open {
			if d.lost[o.Section] {
				open = append(open, o)
			}
		}
		granted := d.granted(l)
		asked := ""
		if len(open) > 0 && !granted && d.asked != nil && (d.serving == nil || d.serving()) {
			asked = d.asked(open, now.acquiring)
		}
		switch {
		case first && len(open) == 0 && d.gone != "":
			return false, d.gone
		case len(open) > 0 && granted:
			return true, fmt.Sprintf("granted again while section %d was open", open[0].Section)
		case asked != "":
			return true, fmt.Sprintf("%s while section %d was open", asked, open[0].Section)
		case len(open) == 0 && granted:
			return false, d.raced
		case len(open) == 0:
			return false, d.ended
		}
		select {
		case <-ctx.Done():
			return false, d.late
		case <-tick.C:
		}
	}
}

// lostSection is the danger of a fault that struck while section m was
// open, from the moment the servers it left serve (a majority back up, a
// minority down): reached when another client is granted m's key, or, on
// the one hot key every acquire asks for, is inside Acquire, while m is
// still open. grantsBefore is how many grants of m's key the judge had
// made when the danger began (the servers serving so, or the strike of a
// fault that strikes at once), -1 until then.
//
// lasting is set for a fault whose nodes stay down through its window (a
// minority's crash), to the look at its strike: its danger begins there,
// and a section that ended did so while they were down.
func (e Env) lostSection(nm *Nemesis, m met, grantsBefore func() int64, lasting *look) danger {
	ended := "recovery outlasted the section: "
	if lasting != nil {
		ended = "the section ended while the nodes were down: "
	}
	d := danger{
		lost: map[int64]bool{m.section: true},
		granted: func(judge.Live) bool {
			g := grantsBefore()
			return g >= 0 && nm.grantsOf(m.key) > g
		},
		raced: fmt.Sprintf("section %d ended as its key was granted again (within one look at the judge's view): not counted",
			m.section),
		ended: fmt.Sprintf("%ssection %d ended before another client asked for its key or was granted it",
			ended, m.section),
		late: fmt.Sprintf("the case ended before another client asked for the key of section %d", m.section),
	}
	d.gone, d.from = d.ended, lasting
	if e.Spec.Workload == workloads.Hot {
		d.asked = func(open []judge.OpenSection, acquiring map[int]time.Duration) string {
			for p, since := range acquiring {
				if !slices.ContainsFunc(open, func(o judge.OpenSection) bool { return o.Process == p }) {
					return fmt.Sprintf("process %d asked for the key (in Acquire since %.3fs)", p, since.Seconds())
				}
			}
			return ""
		}
	}
	return d
}
