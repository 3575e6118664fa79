package sentinel

import (
	"strings"
	"testing"

	"github.com/lockbench/lockbench/compose"
)

// TestSentinelPlacedChecks checks what a Sentinel set on hosts refuses
// beyond what every kind does: sentinels without Redis nodes on hosts,
// Redis nodes without sentinels, and the proxied replication links.
func TestSentinelPlacedChecks(t *testing.T) {
	on := []compose.Placement{{Dir: "/a"}, {Dir: "/b"}}
	for _, tc := range []struct {
		name string
		s    compose.Spec
		o    Options
		want string
	}{
		{name: "sentinels only", s: compose.Spec{Nodes: 2}, o: Options{SentinelsOn: on}, want: "no Redis placements (On)"},
		{name: "nodes only", s: compose.Spec{On: on}, want: "no sentinel placements (SentinelsOn)"},
		{name: "sentinel count", s: compose.Spec{On: on}, o: Options{Sentinels: 3, SentinelsOn: on}, want: "3 sentinels on 2 placements"},
		{name: "proxied replication", s: compose.Spec{On: on}, o: Options{SentinelsOn: on, ProxiedReplication: true},
			want: "ProxiedReplication apply to sets on this machine only"},
		{name: "sentinels placed, nodes proxied here", s: compose.Spec{Nodes: 2, Proxied: true}, o: Options{SentinelsOn: on},
			want: "Proxied, Netns and ProxiedReplication"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.checkPlaced(tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checkPlaced = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
