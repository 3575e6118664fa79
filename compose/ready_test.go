package compose_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
	"github.com/lockbench/lockbench/kinds/postgres"
)

// TestStartTellsRefusedFromSlow: a start that fails says whether the
// server refused to run (its process exited: ErrExited, with the log's
// reason) or was still starting when the wait ended (ErrNotReady, with the
// context's error) — on real PostgreSQL servers: one whose control file is
// gone, which PANICs at start, and one whose clients are cut off as it
// starts, which runs and cannot be seen ready until the cut heals.
func TestStartTellsRefusedFromSlow(t *testing.T) {
	composetest.StartsServersWithin(t, 2*time.Minute)
	if err := compose.PeerNetworkAvailable(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	e := composetest.ForTest(t)
	t.Run("refused", func(t *testing.T) {
		n, err := postgres.StartServer(ctx, e, compose.Spec{Durability: compose.DurabilityFast}, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(n.Dir, "data", "global", "pg_control")); err != nil {
			t.Fatal(err)
		}
		err = compose.StartAll(ctx, n)
		t.Logf("StartAll: %v", err)
		if !errors.Is(err, compose.ErrExited) || errors.Is(err, compose.ErrNotReady) || !strings.Contains(err.Error(), "pg_control") {
			t.Fatalf("StartAll of a server without its control file = %v; want ErrExited with the log's reason", err)
		}
		if n.Running() || !n.Failed() {
			t.Fatalf("a server that exited: Running %v, Failed %v", n.Running(), n.Failed())
		}
	})
	t.Run("slow", func(t *testing.T) {
		n, err := postgres.StartServer(ctx, e, compose.Spec{Netns: true, Durability: compose.DurabilityFast}, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := n.CutClients(); err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = compose.StartAll(wait, n)
		cancel()
		t.Logf("StartAll: %v", err)
		if !errors.Is(err, compose.ErrNotReady) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, compose.ErrExited) {
			t.Fatalf("StartAll of a server that cannot be seen ready = %v; want ErrNotReady and the deadline", err)
		}
		if !n.Running() {
			t.Fatal("the server is not running after a start that was only slow")
		}
		// It was only slow: healed, it is ready.
		if err := n.HealClients(); err != nil {
			t.Fatal(err)
		}
		if err := n.Start(ctx); err != nil {
			t.Fatalf("Start once its clients reach it: %v", err)
		}
	})
}
