package nemesis_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
	"github.com/lockbench/lockbench/nemesis"
)

// waited is how a start that gave up says how long it waited.
var waited = regexp.MustCompile(`not ready after [0-9.]+m?s`)

// TestStartAgainTellsRefusedFromSlow: after a restart, a crash or a power
// loss, a server that refuses what its disk kept (its process exits) is
// the fault's outcome, lost, with its log's reason; one still starting
// when the wait ends is the harness giving up, a failed injection that
// says it was slow and how long it waited — on real PostgreSQL servers:
// one whose control file is gone, and one whose clients are cut off as it
// starts.
func TestStartAgainTellsRefusedFromSlow(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute)
	if err := compose.PeerNetworkAvailable(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	e := composetest.ForTest(t)
	refused, err := postgres.StartServer(ctx, e, compose.Spec{Durability: compose.DurabilityFast}, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := postgres.StartServer(ctx, e, compose.Spec{Netns: true, Durability: compose.DurabilityFast}, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := compose.KillAll(refused, slow); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(refused.Dir, "data", "global", "pg_control")); err != nil {
		t.Fatal(err)
	}
	if err := slow.CutClients(); err != nil {
		t.Fatal(err)
	}

	err = nemesis.StartAgain(ctx, []nemesis.Node{refused})
	var l nemesis.Lost
	if !errors.As(err, &l) || !strings.Contains(l.Error(), "the servers did not come back") || !strings.Contains(l.Error(), "pg_control") {
		t.Fatalf("a server that refused its data: %v; want lost, with the log's reason", err)
	}
	wait, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = nemesis.StartAgain(wait, []nemesis.Node{slow})
	cancel()
	t.Logf("slow: %v", err)
	if err == nil || errors.As(err, &l) || !errors.Is(err, compose.ErrNotReady) || !strings.Contains(err.Error(), "slow") || !waited.MatchString(err.Error()) {
		t.Fatalf("a server still starting: %v; want a failure, not lost, saying it was slow and how long it waited", err)
	}
	if err := slow.HealClients(); err != nil {
		t.Fatal(err)
	}
}
