package bench

import (
	"fmt"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/results"
)

// profileFits returns why backend b's servers cannot run under the
// durability profile, or "" when they can: ZooKeeper and etcd have no
// periodic mode (compose.Durability), and a backend without servers only
// the fast one, which is no profile at all.
func profileFits(b Backend, durability string) string {
	switch k := b.Descriptor.Servers.Kind; {
	case k == backends.NoServers && durability != results.DurabilityFast && durability != "":
		return "no servers: nothing to sync"
	case durability == results.DurabilityPeriodic && (k == backends.ZooKeeper || k == backends.Etcd):
		return fmt.Sprintf("%s has no periodic profile: it syncs its log at every commit (durable) or never (fast)", k)
	}
	return ""
}

// ProfileFits returns why backend b's servers cannot run under the
// durability profile, or "" when they can: a builder of cases leaves such
// a case out, as the runner skips it.
func ProfileFits(b Backend, durability string) string { return profileFits(b, durability) }
