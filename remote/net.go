package remote

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// CutPref is the priority of the policy rules Cut adds, ahead of the main
// table's 32766: `ip rule show pref 4545` on a host lists its cuts, and
// Heal deletes rules of this priority only.
const CutPref = 4545

// Keeper is a Remote that names the addresses its host must keep
// reaching whatever is cut: the control node's (as the host sees it) and
// the judge's. Cut refuses to cut them.
type Keeper interface {
	Kept() []netip.Addr
}

// Cut makes r's host drop every packet it sends to the peers, with a
// blackhole policy rule per peer (`ip rule add to PEER blackhole`): a
// connection to a peer gets no answer, and an established one goes silent
// without a reset on either side, as over a cut cable. Only packets to
// those addresses are dropped, so the control node's and the judge's
// paths stay (a Keeper's kept addresses are refused). A cut is one way — the peer's packets still arrive — so a
// partition between two hosts is a Cut on each, toward the other. Cutting
// a peer already cut changes nothing. Cut reads the rules back and fails
// unless every peer is cut.
func Cut(ctx context.Context, r Remote, peers ...netip.Addr) error {
	if len(peers) == 0 {
		return fmt.Errorf("remote: cut on %s: no peer given", r.Name())
	}
	args, err := cutArgs(r, peers)
	if err != nil {
		return err
	}
	body := `PATH=$PATH:/usr/sbin:/sbin
for a; do
	case $a in *:*) f=-6;; *) f=-4;; esac
	while ip $f rule del to "$a" blackhole pref ` + strconv.Itoa(CutPref) + ` 2>/dev/null; do :; done
	ip $f rule add to "$a" blackhole pref ` + strconv.Itoa(CutPref) + ` || exit 1
done`
	if err := script(ctx, r, "cut", body, nil, args...); err != nil {
		return fmt.Errorf("remote: cut on %s: %w", r.Name(), err)
	}
	in, err := Cuts(ctx, r)
	if err != nil {
		return err
	}
	var missing []string
	for _, p := range peers {
		if !slices.Contains(in, p.Unmap()) {
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("remote: cut on %s: the rules for %s are not in force after adding them", r.Name(), strings.Join(missing, ", "))
	}
	return nil
}

// Heal lifts the cuts toward the peers on r's host, or every cut when no
// peer is given, and reads the rules back to check they have gone.
func Heal(ctx context.Context, r Remote, peers ...netip.Addr) error {
	args, err := cutArgs(r, peers)
	if err != nil {
		return err
	}
	pref := strconv.Itoa(CutPref)
	body := `PATH=$PATH:/usr/sbin:/sbin
if [ $# -eq 0 ]; then
	for f in -4 -6; do
		while ip $f rule del pref ` + pref + ` 2>/dev/null; do :; done
	done
	exit 0
fi
for a; do
	case $a in *:*) f=-6;; *) f=-4;; esac
	while ip $f rule del to "$a" blackhole pref ` + pref + ` 2>/dev/null; do :; done
done`
	if err := script(ctx, r, "heal", body, nil, args...); err != nil {
		return fmt.Errorf("remote: heal on %s: %w", r.Name(), err)
	}
	in, err := Cuts(ctx, r)
	if err != nil {
		return err
	}
	if len(peers) == 0 && len(in) > 0 {
		return fmt.Errorf("remote: heal on %s: cuts toward %v still in force", r.Name(), in)
	}
	for _, p := range peers {
		if slices.Contains(in, p.Unmap()) {
			return fmt.Errorf("remote: heal on %s: the cut toward %s is still in force", r.Name(), p)
		}
	}
	return nil
}

// Cuts returns the peers r's host drops packets to (the blackhole rules
// of priority CutPref), IPv4 then IPv6.
func Cuts(ctx context.Context, r Remote) ([]netip.Addr, error) {
	pref := strconv.Itoa(CutPref)
	body := `PATH=$PATH:/usr/sbin:/sbin
ip -4 rule show pref ` + pref + ` && ip -6 rule show pref ` + pref
	out, err := scriptOutput(ctx, r, "cuts", body)
	if err != nil {
		return nil, fmt.Errorf("remote: cuts on %s: %w", r.Name(), err)
	}
	var addrs []netip.Addr
	for line := range strings.Lines(out) {
		// 4545:	from all to 198.19.255.11 blackhole
		f := strings.Fields(line)
		i := slices.Index(f, "to")
		if i < 0 || i+1 >= len(f) || !slices.Contains(f, "blackhole") {
			continue
		}
		a, err := netip.ParseAddr(f[i+1])
		if err != nil {
			// A prefix: not a rule Cut adds.
			continue
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// cutArgs checks the peers and renders them for the scripts.
func cutArgs(r Remote, peers []netip.Addr) ([]string, error) {
	var kept []netip.Addr
	if k, ok := r.(Keeper); ok {
		for _, a := range k.Kept() {
			kept = append(kept, a.Unmap())
		}
	}
	args := make([]string, len(peers))
	var errs []error
	for i, p := range peers {
		p = p.Unmap()
		switch {
		case !p.IsValid():
			errs = append(errs, fmt.Errorf("peer %d: no address", i))
		case p.IsUnspecified(), p.IsLoopback(), p.IsMulticast():
			errs = append(errs, fmt.Errorf("peer %s: not a host's address", p))
		case p.Zone() != "":
			errs = append(errs, fmt.Errorf("peer %s: an address with a zone", p))
		case slices.Contains(kept, p):
			errs = append(errs, fmt.Errorf("peer %s must stay reachable from %s (the control node's or the judge's path)", p, r.Name()))
		}
		args[i] = p.String()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("remote: cut on %s: %w", r.Name(), err)
	}
	return args, nil
}
