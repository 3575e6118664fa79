package compose

import (
	"context"
	"fmt"
	"os/exec"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// Faults lists the faults in force on the proxy, as the proxy enforces
// them ("delay: latency 50ms on downstream"): what a nemesis reads back to
// prove that a latency or a proxy partition took. A proxy on a host is
// asked through its API; when it cannot be, the error says why.
func (x *Proxy) Faults(ctx context.Context) ([]string, error) {
	var in []toxicView
	if x.placed != nil {
		var err error
		if in, err = x.placed.toxics(ctx, x.Name); err != nil {
			return nil, fmt.Errorf("compose: proxy %s: read its faults: %w", x.Name, err)
		}
	} else {
		for _, name := range []string{"delay", "partition-upstream", "partition-downstream"} {
			t := x.p.Toxics.GetToxic(name)
			if t == nil {
				continue
			}
			v := toxicView{Name: t.Name, Type: t.Type, Stream: t.Stream}
			if l, ok := t.Toxic.(*toxics.LatencyToxic); ok {
				v.Attributes.Latency = l.Latency
			}
			in = append(in, v)
		}
	}
	var out []string
	for _, name := range []string{"delay", "partition-upstream", "partition-downstream"} {
		for _, t := range in {
			if t.Name != name {
				continue
			}
			what := t.Type
			if t.Type == "latency" {
				what += fmt.Sprintf(" %dms", t.Attributes.Latency)
			}
			out = append(out, fmt.Sprintf("%s: %s on %s", t.Name, what, t.Stream))
		}
	}
	return out, nil
}

// FakeClockAvailable returns nil when servers here can run under the
// clock preload (FakeClock options): the C compiler (DefaultPrograms().CC) that builds it, on
// each host on first use, is installed. (A host placed elsewhere may name
// a prebuilt one: Placement.ClockPreload.)
func FakeClockAvailable() error {
	cc := DefaultPrograms().CC
	if _, err := exec.LookPath(cc); err != nil {
		return fmt.Errorf("compose: the clock preload is built with %s (Debian's gcc): %w", cc, err)
	}
	return nil
}

// HasLazyFS reports whether the node's dir is on a lazy filesystem: a
// power loss can drop what it did not sync.
func (n *Node) HasLazyFS() bool { return n.lazy != nil }

// HasFakeClock reports whether the server runs under the clock preload:
// its wall clock can jump and change its rate.
func (n *Node) HasFakeClock() bool { return n.clock != nil }

// Cuttable reports whether CutClients can cut the server's clients off:
// it runs in a network namespace of its own, or on a host of its own
// (Placement: rules on its host and its client hosts).
func (n *Node) Cuttable() bool { return n.spec.net != nil || n.spec.place != nil }
