package report

import (
	"fmt"
	"strings"
)

// classBound is a backend's evidence of one kind under one fault class
// and durability profile: never pooled with another class's, since
// classes differ in danger (a client pause expires leases by design, a
// restart loses keys only without persistence).
type classBound struct {
	class, profile string
	bound
}

// String is the bound as the safety table words it: "client-pause (fast)
// 0/6 ≤39%".
func (c classBound) String() string {
	return fmt.Sprintf("%s (%s) %s", c.class, c.profile, c.cell())
}

// classBounds returns a backend's bounds of kind k under guard ("" for
// every guard, each run counted once), per class of classes and per
// profile it ran them under, in the order of the safety table.
func (ds *dataset) classBounds(backend, guard string, classes []string, k kind) []classBound {
	var out []classBound
	for _, cls := range classes {
		for _, d := range ds.Durabilities {
			gs := ds.find(query{Backend: backend, Class: cls, Guard: guard, Durability: d})
			if len(gs) == 0 {
				continue
			}
			out = append(out, classBound{class: cls, profile: d, bound: rateOf(totals(gs), k, cls)})
		}
	}
	return out
}

// boundsText joins class bounds: "client-pause (fast) 0/6 ≤39%; restart
// (fast) 0/2 ≤78%", or "none" without any.
func boundsText(bs []classBound) string {
	if len(bs) == 0 {
		return "none"
	}
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = b.String()
	}
	return strings.Join(parts, "; ")
}

// withEvents keeps the class bounds that counted any event.
func withEvents(bs []classBound) []classBound {
	var out []classBound
	for _, b := range bs {
		if b.K > 0 {
			out = append(out, b)
		}
	}
	return out
}

// withOne names the trials of a bound per injection as the run counted
// them: "tested injections with one", or, when some case did not judge
// its injections, "injections with one, not judged tested".
func (ds *dataset) withOne() string {
	for _, g := range ds.Groups {
		if g.Unjudged {
			return "injections with one, not judged tested"
		}
	}
	return "tested injections with one"
}

// faultClasses is classes without none.
func faultClasses(classes []string) []string {
	return without(classes, faultNone)
}
