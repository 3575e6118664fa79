package answer

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/results"
)

// TestWriteOnlyFenceIsTheResourcesLimit: every lease lock let a late
// write in through the write-only fence after a client pause longer than
// its lease (as ZooKeeper, etcd and Redis did, docs/measurements.md).
// With token = write none qualifies, and the answer says in words that
// the resource is the limit and what would change it; with token =
// read-write, where the reads carry the token too and nothing got
// through, a lock qualifies.
func TestWriteOnlyFenceIsTheResourcesLimit(t *testing.T) {
	var cases []results.Case
	for _, b := range []string{"zookeeper", "etcd", "redis"} {
		late := faulted(b, "client-pause", "fence", "ee")
		late.Fault, late.StaleAccepted = "client-pause?at=extend", 1
		rw := faulted(b, "client-pause", "fence-rw", "ee")
		rw.Fault = "client-pause?at=extend"
		rw.Trial = 2 // a run of its own: a case per guard of one run would count its injections once
		cases = append(cases, correct(b, late, rw, faulted(b, "restart", "fence-rw", "...."), faulted(b, "client-pause", "fence-rw", "...."))...)
	}
	p := results.Profile{Intent: results.IntentCorrectness, Token: results.TokenWrite,
		MaxPause: results.Duration(1500 * time.Millisecond), TTL: results.Duration(time.Second)}
	a := decideCases(t, p, cases)
	ch := a.Correctness
	if len(ch.Pick) > 0 {
		t.Fatalf("token write: picked %v, want none", ch.Pick)
	}
	words := strings.Join(ch.Reasons, " ")
	for _, want := range []string{"The resource is the limit", "zookeeper, etcd and redis", "token: read-write", "pauses bounded below the lease"} {
		if !strings.Contains(words, want) {
			t.Errorf("the answer does not say %q:\n%s", want, words)
		}
	}
	if !slices.ContainsFunc(ch.Unqualified, func(s string) bool { return strings.Contains(s, "write-only fence") }) {
		t.Errorf("no candidate's reason names the write-only fence: %q", ch.Unqualified)
	}
	p.Token = results.TokenReadWrite
	if a := decideCases(t, p, cases); len(a.Correctness.Pick) == 0 ||
		strings.Contains(strings.Join(a.Correctness.Reasons, " "), "The resource is the limit") {
		t.Errorf("token read-write: pick %v, reasons %q: want a pick, and no word of the write-only fence",
			a.Correctness.Pick, a.Correctness.Reasons)
	}
}
