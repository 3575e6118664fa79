package sentinel

import (
	"errors"
	"fmt"

	"github.com/lockbench/lockbench/compose"
)

// checkPlaced says what is wrong with the placement of a Sentinel set on
// hosts (s resolved, its Redis nodes' count checked against On): what
// it excludes, and the sentinels' count it fixes.
func (o *Options) checkPlaced(s compose.Spec) error {
	var errs []error
	if s.On == nil {
		errs = append(errs, fmt.Errorf("%d sentinel placements (SentinelsOn) but no Redis placements (On): the Redis nodes of a set whose "+
			"sentinels are on hosts go on hosts too", len(o.SentinelsOn)))
	}
	switch {
	case len(o.SentinelsOn) == 0:
		errs = append(errs, errors.New("no sentinel placements (SentinelsOn): the sentinels of a set on hosts go on hosts too"))
	case o.Sentinels != 0 && o.Sentinels != len(o.SentinelsOn):
		errs = append(errs, fmt.Errorf("%d sentinels on %d placements: want one each", o.Sentinels, len(o.SentinelsOn)))
	}
	if s.Proxied || s.Netns || o.ProxiedReplication {
		errs = append(errs, errors.New("Proxied, Netns and ProxiedReplication apply to sets on this machine only"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sentinel: Sentinel set on hosts: %w", err)
	}
	return nil
}

// sentinelsSide is Set.SentinelsSide for a set placed on hosts,
// or on this machine with its Redis nodes in namespaces (netns) or not.
func sentinelsSide(placed, netns bool) string {
	switch {
	case placed:
		return "the sentinels run on their own hosts (beside the Redis nodes, or apart), on the servers' side of a cut of the clients: they " +
			"keep seeing the master"
	case netns:
		return "the sentinels run on the clients' host, on the clients' side of a cut: they lose the master with them"
	}
	return "the sentinels run on the clients' host, beside the nodes"
}
