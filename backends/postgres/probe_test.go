package postgres

import (
	"context"
	"testing"

	"github.com/lockbench/lockbench/backends"
)

// TestProbeWithoutTable: a server without the lease table (no grant
// created it, or a power loss took it) holds none of the keys; the probe
// says so rather than fail, so a nemesis reads that loss back.
func TestProbeWithoutTable(t *testing.T) {
	addr := shared.Get(t)
	s, err := Probe(context.Background(), backends.Config{Addrs: []string{addr}, Params: map[string]string{"table": "never_created"}}, "k")
	if err != nil || s.Records != 0 {
		t.Fatalf("Probe = %+v, %v; want no records and no error", s, err)
	}
}
