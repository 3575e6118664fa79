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

// A Path is traffic a host sends that a cut drops: every packet to Addr,
// or, with DPort or SPort set, only the TCP packets to Addr with that
// destination port (what the host sends to a server there) or that source
// port (what a server on the host answers from its port). Cutting the
// paths of one server's port on both sides separates it from a peer while
// the other servers of both hosts still talk.
type Path struct {
	Addr         netip.Addr
	DPort, SPort uint16
}

// To returns the paths of every packet to each of addrs.
func To(addrs ...netip.Addr) []Path {
	out := make([]Path, len(addrs))
	for i, a := range addrs {
		out[i] = Path{Addr: a}
	}
	return out
}

// String is the path as ip rule's selector reads: "to 198.18.0.11", "to
// 198.18.0.11 ipproto tcp dport 6379".
func (p Path) String() string {
	s := "to " + p.Addr.Unmap().String()
	if p.DPort != 0 || p.SPort != 0 {
		s += " ipproto tcp"
	}
	if p.DPort != 0 {
		s += " dport " + strconv.Itoa(int(p.DPort))
	}
	if p.SPort != 0 {
		s += " sport " + strconv.Itoa(int(p.SPort))
	}
	return s
}

// Cut makes r's host drop every packet it sends to the peers, with a
// blackhole policy rule per peer (`ip rule add to PEER blackhole`): see
// CutPaths.
func Cut(ctx context.Context, r Remote, peers ...netip.Addr) error {
	if len(peers) == 0 {
		return fmt.Errorf("remote: cut on %s: no peer given", r.Name())
	}
	return CutPaths(ctx, r, To(peers...)...)
}

// CutPaths makes r's host drop the packets of each path, with a blackhole
// policy rule per path (`ip rule add to PEER [ipproto tcp dport PORT]
// blackhole`): an established connection goes silent without a reset on
// either side, as over a cut cable, and the peer's new connections get no
// answer; the host's own new connections fail at once (the kernel
// refuses to route them: EINVAL), which a cut cable would let time out.
// (A rule on what the host receives would be no quieter: a host that
// does not forward answers what it drops with an ICMP unreachable.) Only those
// packets are dropped, so the control node's and the judge's paths stay
// (a Keeper's kept addresses are refused, but for the paths of a port). A cut is one way — the peer's
// packets still arrive — so a partition between two hosts is a cut on
// each, toward the other. Cutting a path already cut changes nothing; a
// whole address's cut replaces the cuts of its ports. CutPaths reads the
// rules back and fails unless every path is cut.
func CutPaths(ctx context.Context, r Remote, paths ...Path) error {
	if len(paths) == 0 {
		return fmt.Errorf("remote: cut on %s: no path given", r.Name())
	}
	args, err := pathArgs(r, paths)
	if err != nil {
		return err
	}
	body := `PATH=$PATH:/usr/sbin:/sbin
for sel; do
	case $sel in *:*) f=-6;; *) f=-4;; esac
	while ip $f rule del $sel blackhole pref ` + strconv.Itoa(CutPref) + ` 2>/dev/null; do :; done
	ip $f rule add $sel blackhole pref ` + strconv.Itoa(CutPref) + ` || exit 1
done`
	if err := script(ctx, r, "cut", body, nil, args...); err != nil {
		return fmt.Errorf("remote: cut on %s: %w", r.Name(), err)
	}
	in, err := CutsInForce(ctx, r)
	if err != nil {
		return err
	}
	var missing []string
	for _, p := range paths {
		if !slices.Contains(in, p.unmap()) {
			missing = append(missing, p.String())
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("remote: cut on %s: the rules %s are not in force after adding them", r.Name(), strings.Join(missing, ", "))
	}
	return nil
}

// Heal lifts the cuts toward the peers on r's host (those of their ports
// too), or every cut when no peer is given, and reads the rules back to
// check they have gone.
func Heal(ctx context.Context, r Remote, peers ...netip.Addr) error {
	return HealPaths(ctx, r, To(peers...)...)
}

// HealPaths lifts the cuts of the paths on r's host, or every cut when no
// path is given, and reads the rules back to check they have gone. The
// heal of a whole address lifts the cuts of its ports too.
func HealPaths(ctx context.Context, r Remote, paths ...Path) error {
	args, err := pathArgs(r, paths)
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
for sel; do
	case $sel in *:*) f=-6;; *) f=-4;; esac
	while ip $f rule del $sel blackhole pref ` + pref + ` 2>/dev/null; do :; done
done`
	if err := script(ctx, r, "heal", body, nil, args...); err != nil {
		return fmt.Errorf("remote: heal on %s: %w", r.Name(), err)
	}
	in, err := CutsInForce(ctx, r)
	if err != nil {
		return err
	}
	if len(paths) == 0 && len(in) > 0 {
		return fmt.Errorf("remote: heal on %s: cuts %v still in force", r.Name(), in)
	}
	for _, p := range paths {
		for _, c := range in {
			if c == p.unmap() || p.DPort == 0 && p.SPort == 0 && c.Addr == p.Addr.Unmap() {
				return fmt.Errorf("remote: heal on %s: the cut %s is still in force", r.Name(), c)
			}
		}
	}
	return nil
}

// Cuts returns the peers r's host drops every packet to (the whole
// addresses cut), IPv4 then IPv6.
func Cuts(ctx context.Context, r Remote) ([]netip.Addr, error) {
	in, err := CutsInForce(ctx, r)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	for _, p := range in {
		if p.DPort == 0 && p.SPort == 0 {
			addrs = append(addrs, p.Addr)
		}
	}
	return addrs, nil
}

// CutsInForce returns every path r's host drops (the blackhole rules of
// priority CutPref), IPv4 then IPv6.
func CutsInForce(ctx context.Context, r Remote) ([]Path, error) {
	pref := strconv.Itoa(CutPref)
	body := `PATH=$PATH:/usr/sbin:/sbin
ip -4 rule show pref ` + pref + ` && ip -6 rule show pref ` + pref
	out, err := scriptOutput(ctx, r, "cuts", body)
	if err != nil {
		return nil, fmt.Errorf("remote: cuts on %s: %w", r.Name(), err)
	}
	var paths []Path
	for line := range strings.Lines(out) {
		// 4545:	from all to 198.19.255.11 ipproto tcp dport 6379 blackhole
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
		p := Path{Addr: a}
		port := func(key string) uint16 {
			if j := slices.Index(f, key); j >= 0 && j+1 < len(f) {
				n, _ := strconv.ParseUint(f[j+1], 10, 16)
				return uint16(n)
			}
			return 0
		}
		p.DPort, p.SPort = port("dport"), port("sport")
		paths = append(paths, p)
	}
	return paths, nil
}

func (p Path) unmap() Path { p.Addr = p.Addr.Unmap(); return p }

// pathArgs checks the paths and renders them as ip rule selectors.
func pathArgs(r Remote, paths []Path) ([]string, error) {
	var kept []netip.Addr
	if k, ok := r.(Keeper); ok {
		for _, a := range k.Kept() {
			kept = append(kept, a.Unmap())
		}
	}
	args := make([]string, len(paths))
	var errs []error
	for i, path := range paths {
		p := path.Addr.Unmap()
		switch {
		case !p.IsValid():
			errs = append(errs, fmt.Errorf("peer %d: no address", i))
		case p.IsUnspecified(), p.IsLoopback(), p.IsMulticast():
			errs = append(errs, fmt.Errorf("peer %s: not a host's address", p))
		case p.Zone() != "":
			errs = append(errs, fmt.Errorf("peer %s: an address with a zone", p))
		case slices.Contains(kept, p) && path.DPort == 0 && path.SPort == 0:
			// The cut of one server's port leaves the kept paths: a judge
			// on a server's host still hears the clients cut from it.
			errs = append(errs, fmt.Errorf("peer %s must stay reachable from %s (the control node's or the judge's path): cut only a server's "+
				"port there", p, r.Name()))
		}
		args[i] = path.unmap().String()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("remote: cut on %s: %w", r.Name(), err)
	}
	return args, nil
}
