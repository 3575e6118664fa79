package compose

import (
	"errors"
	"strings"
	"testing"
)

// TestSpecResolve checks how each kind resolves a Spec: the count and
// durability it fills in, and an error naming what the kind cannot start
// with, before anything starts.
func TestSpecResolve(t *testing.T) {
	for _, tc := range []struct {
		name    string
		k       Rules
		s       Spec
		nodes   int
		d       Durability
		wantErr string
		noDur   bool
	}{
		{name: "sentinel: the smallest set", k: sentinelRules, s: Spec{}, nodes: 2, d: DurabilityFast},
		{name: "sentinel: no replica", k: sentinelRules, s: Spec{Nodes: 1}, wantErr: "1 Redis nodes in a Sentinel set: want at least 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.s.Resolve(tc.k)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("resolve = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				if tc.noDur && !errors.Is(err, ErrNoDurability) {
					t.Errorf("%v does not wrap ErrNoDurability", err)
				}
				return
			}
			if err != nil || got.Nodes != tc.nodes || got.Durability != tc.d {
				t.Fatalf("resolve = %d nodes, %q, %v; want %d, %q", got.Nodes, got.Durability, err, tc.nodes, tc.d)
			}
		})
	}
}

// TestSentinelPlacedChecks checks what a Sentinel set on hosts refuses
// beyond what every kind does: sentinels without Redis nodes on hosts,
// Redis nodes without sentinels, and the proxied replication links.
func TestSentinelPlacedChecks(t *testing.T) {
	on := []Placement{{Dir: "/a"}, {Dir: "/b"}}
	for _, tc := range []struct {
		name string
		s    Spec
		o    SentinelOptions
		want string
	}{
		{name: "sentinels only", s: Spec{Nodes: 2}, o: SentinelOptions{SentinelsOn: on}, want: "no Redis placements (On)"},
		{name: "nodes only", s: Spec{On: on}, want: "no sentinel placements (SentinelsOn)"},
		{name: "sentinel count", s: Spec{On: on}, o: SentinelOptions{Sentinels: 3, SentinelsOn: on}, want: "3 sentinels on 2 placements"},
		{name: "proxied replication", s: Spec{On: on}, o: SentinelOptions{SentinelsOn: on, ProxiedReplication: true},
			want: "ProxiedReplication apply to sets on this machine only"},
		{name: "sentinels placed, nodes proxied here", s: Spec{Nodes: 2, Proxied: true}, o: SentinelOptions{SentinelsOn: on},
			want: "Proxied, Netns and ProxiedReplication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.checkPlaced(tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkPlaced = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
