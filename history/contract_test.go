package history

import (
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
)

// TestImposeDeclaredContract: the declared contract replaces every
// promise a grant or extension reports, and the reports that differ are
// counted; a grant whose worker claimed a longer promise turns from a
// lock bug's earlier grant into an expired holder's no more.
func TestImposeDeclaredContract(t *testing.T) {
	sec := int64(time.Second)
	declared := Contract{Promise: sec, MaxValidity: sec}
	for _, tc := range []struct {
		name      string
		promise   int64
		departs   int64
		wantClass Class
	}{
		{"as declared", sec, 0, LockBug},
		{"a promise claimed ten times longer", 10 * sec, 1, LockBug},
		{"a promise claimed ten times shorter", sec / 10, 1, LockBug},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := []Op{
				{Index: 0, Process: 1, F: Acquire, Type: OK, Key: "k", Section: 1, Invoke: 0, Complete: sec / 100, Promise: tc.promise, MaxValidity: sec},
				{Index: 1, Process: 2, F: Acquire, Type: OK, Key: "k", Section: 2, Invoke: sec / 2, Complete: sec / 2},
				{Index: 2, Process: 1, F: End, Type: OK, Key: "k", Section: 1, Invoke: sec * 3 / 4, Complete: sec * 3 / 4},
				{Index: 3, Process: 2, F: End, Type: OK, Key: "k", Section: 2, Invoke: sec, Complete: sec},
			}
			judged, d := declared.Impose(ops)
			if d.N != tc.departs || len(d.Examples) != int(tc.departs) {
				t.Fatalf("departures %+v: want %d", d, tc.departs)
			}
			if judged[0].Promise != sec || ops[0].Promise != tc.promise {
				t.Fatalf("judged promise %d (the history's %d): want the declaration, the history untouched", judged[0].Promise, ops[0].Promise)
			}
			if got := classify(judged[0], judged[1]); got != tc.wantClass {
				t.Fatalf("class %q, want %q", got, tc.wantClass)
			}
		})
	}
}

// TestInjectsSpanTheirWindows: each injection becomes an inject op from
// its strike to the end of the window that began with it, failed when it
// tested nothing, carrying the injection as recorded; the checkers of
// locks pass it by.
func TestInjectsSpanTheirWindows(t *testing.T) {
	yes, no := true, false
	targets := []results.Target{
		{Injection: 1, Nodes: []string{"a"}, Tested: &yes, AtS: 1},
		{Injection: 2, Nodes: []string{"b"}, Tested: &no, WhyNot: "recovery outlasted the section", AtS: 3},
	}
	windows := []results.Window{{Label: "a down", StartS: 1, EndS: 2.5}, {Label: "b down", StartS: 3.0002, EndS: 3.5}}
	ops := Injects(targets, windows, 7)
	if len(ops) != 2 || ops[0].Index != 7 || ops[1].Index != 8 {
		t.Fatalf("ops %+v: want two, indexed from 7", ops)
	}
	if ops[0].Type != OK || ops[0].Invoke != int64(time.Second) || ops[0].Complete != int64(2.5*float64(time.Second)) {
		t.Errorf("op %+v: want ok, from 1 s to 2.5 s", ops[0])
	}
	if ops[1].Type != Fail || ops[1].Error != targets[1].WhyNot || ops[1].Injection.Nodes[0] != "b" || ops[1].Complete != int64(3.5*float64(time.Second)) {
		t.Errorf("op %+v: want failed with why, on b, to 3.5 s", ops[1])
	}
	if r := Check(ops, "none", false); r.Sections != 0 || r.Overlaps != 0 {
		t.Errorf("report %+v of inject ops alone: want nothing counted", r)
	}
}
