package envelope_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/lockbench/lockbench/backends/all"
	"github.com/lockbench/lockbench/bench"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/envelope"
	"github.com/lockbench/lockbench/history"
	"github.com/lockbench/lockbench/judge"
	"github.com/lockbench/lockbench/worker"
)

// workerEnv makes the test binary a worker process (worker.Main).
const workerEnv = "LOCKBENCH_ENVELOPE_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := worker.Main(context.Background(), os.Stdin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCasesProbeARealPoint: one point of a real envelope, end to end on
// a real Redis: a client pause of 2 leases, once, judged without a guard
// and with fencing. The paused holder's lease expired, so it is tested,
// no lock bug (an expired holder is not one) and a late write under
// guard none; the point carries its seed, its replay line and its
// history, which reads back.
func TestCasesProbeARealPoint(t *testing.T) {
	composetest.StartsServersWithin(t, 30*time.Second) // 24 s under -race on a 2-core machine loaded 22×
	b, err := bench.ParseBackend("redis")
	if err != nil {
		t.Fatal(err)
	}
	fams, err := envelope.Families([]string{"client-pause"}, b)
	if err != nil || len(fams) != 1 {
		t.Fatalf("families %v, %v", fams, err)
	}
	dir := t.TempDir()
	c := &envelope.Cases{Clusters: bench.NewClusters(composetest.ForTest(t), nil), Backend: b, Family: fams[0],
		Guards: []judge.Guard{judge.GuardNone, judge.GuardFenceRW}, Clients: 2, Dir: dir, Sub: "redis-pause",
		Worker: worker.Command{Path: os.Args[0], Env: []string{workerEnv + "=1"}}}
	pt, err := c.Probe(t.Context(), 2, 1, 42)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("point %+v", pt)
	if pt.Tested != 1 || pt.LockBugs != 0 || pt.LateWrites["none"] != 1 || pt.LateWrites["fence-rw"] != 0 {
		t.Fatalf("point %+v: want 1 tested, no lock bug, a late write under none and none under fence-rw", pt)
	}
	if len(pt.Seeds) != 1 || pt.Seeds[0] != 42 || len(pt.Replay) != 1 || len(pt.Histories) != 1 || len(c.Results) != 2 {
		t.Fatalf("seeds %v, replay %v, histories %v, %d results", pt.Seeds, pt.Replay, pt.Histories, len(c.Results))
	}
	if _, err := history.ReadFile(filepath.Join(dir, pt.Histories[0])); err != nil {
		t.Fatal(err)
	}
}
