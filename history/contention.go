package history

import (
	"cmp"
	"slices"
)

// contendedGrants counts the grants made while another client's acquire
// of the same key was in progress: invoked at or before the grant reached
// the judge and not yet returned by then. The grant's own acquire
// returned at that moment and does not count; a client's calls are
// sequential, so no other acquire of its own can be in progress. An
// acquire of unknown outcome was in progress until the judge learned of
// it.
func contendedGrants(ops []Op) int64 {
	type calls struct{ invokes, completes []int64 }
	byKey := map[string]*calls{}
	for _, o := range ops {
		if o.F != Acquire {
			continue
		}
		k := byKey[o.Key]
		if k == nil {
			k = &calls{}
			byKey[o.Key] = k
		}
		k.invokes = append(k.invokes, o.Invoke)
		k.completes = append(k.completes, o.Complete)
	}
	for _, k := range byKey {
		slices.Sort(k.invokes)
		slices.Sort(k.completes)
	}
	// upTo counts the values of sorted xs at or before t.
	upTo := func(xs []int64, t int64) int {
		i, _ := slices.BinarySearchFunc(xs, t, func(x, t int64) int { return cmp.Compare(x, t+1) })
		return i
	}
	var n int64
	for _, o := range ops {
		if o.F != Acquire || o.Type != OK || o.Section <= 0 {
			continue
		}
		k := byKey[o.Key]
		if upTo(k.invokes, o.Complete)-upTo(k.completes, o.Complete) > 0 {
			n++
		}
	}
	return n
}
