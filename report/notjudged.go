package report

import (
	"fmt"
	"slices"
	"strings"
)

// notJudged returns why a backend has no valid case under a fault class:
// the reason the run recorded (the backend's own, from its descriptor, or
// the suite's), the invalid cases, or that the run did not say. It is
// what the report prints instead of a blank, and never a pass.
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
