package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockbench/lockbench/results"
)

// Verdict is a linearizability check's answer with the reason for an
// unknown or a failure.
type Verdict struct {
	Result results.Verdict
	Reason string
}

// mutexInput is an operation of the mutex models.
type mutexInput struct {
	release  bool
	process  int
	token    uint64
	hasToken bool // a token of 0 is a token (ZooKeeper's first sequence number)
}

// unknownOutput marks an operation whose outcome is unknown (Type Info).
type unknownOutput struct{}

// free is the mutex model's state of a key nobody holds.
const free = -1

// mutexModel is a lock per key: an acquire takes a free key, a release
// frees the key its process holds. A release that found its lease already
// ended (Type Fail) still ends the holding in the model: the lease ran
// out, and if nobody took the key meanwhile that is no violation. An
// operation of unknown outcome may or may not take effect.
var mutexModel = (&porcupine.NondeterministicModel{
	Partition: partitionByKey,
	Init:      func() []any { return []any{free} },
	Step: func(state, input, output any) []any {
		holder, in := state.(int), input.(mutexInput)
		_, unknown := output.(unknownOutput)
		switch {
		case !in.release && holder == free && unknown:
			return []any{free, in.process}
		case !in.release && holder == free:
			return []any{in.process}
		case !in.release && unknown:
			return []any{holder} // it cannot have been granted: no effect
		case !in.release:
			return nil // granted while held
		case holder == in.process && unknown:
			return []any{free, holder}
		case holder == in.process:
			return []any{free}
		}
		return nil // a release of a key the process did not hold
	},
	DescribeOperation: describeMutexOp,
	DescribeState: func(state any) string {
		if h := state.(int); h != free {
			return fmt.Sprintf("held by %d", h)
		}
		return "free"
	},
}).ToModel()

// fencedModel asks only that a key's grants carry strictly increasing
// tokens in an order consistent with real time: two holders at once are
// allowed (a fencing resource makes them harmless), a token that does not
// grow is not. Its state is the least token the next grant may carry.
var fencedModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return uint64(0) },
	Step: func(state, input, _ any) (bool, any) {
		least, in := state.(uint64), input.(mutexInput)
		if in.token < least {
			return false, least
		}
		return true, in.token + 1
	},
	DescribeOperation: describeMutexOp,
	DescribeState:     func(state any) string { return fmt.Sprintf("next token at least %d", state.(uint64)) },
}

func describeMutexOp(input, output any) string {
	in := input.(mutexInput)
	s := fmt.Sprintf("acquire by %d", in.process)
	if in.hasToken {
		s += fmt.Sprintf(" (token %d)", in.token)
	}
	if in.release {
		s = fmt.Sprintf("release by %d", in.process)
	}
	if _, unknown := output.(unknownOutput); unknown {
		s += " → ?"
	}
	return s
}

// keyed is an operation with the key it partitions on.
type keyed struct{ key string }

func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, o := range ops {
		k := o.Metadata.(keyed).key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], o)
	}
	out := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

// operations turns a history into the operations of the mutex models:
// acquires that were granted or whose outcome is unknown, and the
// releases of the sections. A section whose holder died, or whose release
// is missing from the history, ends with a release of unknown outcome
// invoked when the section ended.
// Unknown outcomes are open-ended: they return after every other
// operation.
func operations(ops []Op) []porcupine.Operation {
	var last int64
	for _, o := range ops {
		last = max(last, o.Complete, o.Invoke)
	}
	never := last + 1
	var out []porcupine.Operation
	released := map[int64]bool{}
	ended := map[int64]Op{}
	granted := map[int64]Op{}
	add := func(o Op, release, unknown bool) {
		p := porcupine.Operation{
			ClientId: o.Process, Input: mutexInput{release: release, process: o.Process, token: o.Token, hasToken: o.HasToken},
			Call: o.Invoke, Return: o.Complete, Output: true, Metadata: keyed{o.Key},
		}
		if unknown {
			p.Output, p.Return = unknownOutput{}, never
		}
		out = append(out, p)
	}
	for _, o := range ops {
		switch {
		case o.F == Acquire && o.Type == OK:
			granted[o.Section] = o
			add(o, false, false)
		case o.F == Acquire && o.Type == Info:
			add(o, false, true)
		case o.F == Release && o.Section > 0:
			released[o.Section] = true
			add(o, true, o.Type == Info)
		case o.F == End:
			ended[o.Section] = o
		}
	}
	for id, g := range granted {
		if released[id] {
			continue
		}
		// No release: the holder died, or the history stops. The
		// holding lasts at least to the section's end, or to the end
		// of the history when the section never ended.
		end, ok := ended[id]
		if !ok {
			end = g
			end.Complete = last
		}
		end.Invoke = max(end.Complete, g.Complete)
		add(end, true, true)
	}
	slices.SortStableFunc(out, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	return out
}

// Linearizable checks the history against the mutex model: is there an
// order of its acquires and releases, each placed inside its interval,
// in which no key is granted while held? Unknown when the check runs out
// of timeout.
func Linearizable(ops []Op, timeout time.Duration) Verdict {
	return check(mutexModel, operations(ops), timeout, "two holders of a key at once in every order the operations' times allow")
}

// LinearizableFenced checks the history against the fenced-mutex model:
// do the grants' tokens strictly increase in an order consistent with
// real time? Unknown when no grant carried a token (the backend issues
// none) or the check runs out of timeout.
func LinearizableFenced(ops []Op, timeout time.Duration) Verdict {
	var grants []porcupine.Operation
	tokens, grantsSeen := 0, 0
	for _, o := range operations(ops) {
		in := o.Input.(mutexInput)
		if in.release {
			continue
		}
		if _, unknown := o.Output.(unknownOutput); unknown {
			continue // an acquire of unknown outcome has no token to check
		}
		grantsSeen++
		if in.hasToken {
			tokens++
			grants = append(grants, o)
		}
	}
	switch {
	case grantsSeen == 0:
		return Verdict{results.Unknown, results.NoGrant}
	case tokens == 0:
		return Verdict{results.Unknown, "the backend issues no fencing tokens"}
	case tokens < grantsSeen:
		return Verdict{results.Unknown, fmt.Sprintf("%d of %d grants carried no token", grantsSeen-tokens, grantsSeen)}
	}
	return check(fencedModel, grants, timeout, "a key's tokens do not strictly increase in any order the grants' times allow")
}

func check(m porcupine.Model, ops []porcupine.Operation, timeout time.Duration, illegal string) Verdict {
	if len(ops) == 0 {
		return Verdict{results.Linearizable, ""}
	}
	switch porcupine.CheckOperationsTimeout(m, ops, timeout) {
	case porcupine.Ok:
		return Verdict{results.Linearizable, ""}
	case porcupine.Illegal:
		return Verdict{results.NotLinearizable, illegal + where(m, ops, timeout)}
	}
	return Verdict{results.Unknown, fmt.Sprintf("the check did not finish in %v", timeout)}
}

// where names the first key whose operations have no linearization, and
// how far the longest partial one gets.
func where(m porcupine.Model, ops []porcupine.Operation, timeout time.Duration) string {
	for _, part := range partitionByKey(ops) {
		res, info := porcupine.CheckOperationsVerbose(m, part, timeout)
		if res != porcupine.Illegal {
			continue
		}
		key := part[0].Metadata.(keyed).key
		longest := 0
		for _, p := range info.PartialLinearizations() {
			for _, lin := range p {
				longest = max(longest, len(lin))
			}
		}
		return fmt.Sprintf(": key %q, whose %d operations cannot be ordered beyond the first %d", key, len(part), longest)
	}
	return ""
}
