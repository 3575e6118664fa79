package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The scenarios that break servers, each a strike that drive repeats on
// the case's schedule and proves.

var serverPause = &Scenario{
	Name:           "server-pause",
	span:           lasting,
	QuorumDuration: quorumCase,
	Doc: "servers are stopped (SIGSTOP) for a lease (at least a second), then resumed: a random minority, or the leader (every " +
		"other injection; the master of a Sentinel set, the single server of a one-node backend)",
	Requires: Servers,
	plan: func(e Env) plan {
		return e.drive(strike{
			label: "paused", lasts: e.window(), exclusion: true,
			pick: func(ctx context.Context, i int) ([]Node, error) {
				if i%2 == 0 || len(e.Target.Nodes) == 1 {
					if l, err := e.Target.leader(ctx); l != nil || err != nil {
						return []Node{l}, err
					}
				}
				return e.minority(), nil
			},
			do: func(_ context.Context, a attempt) (string, error) {
				a.struck()
				err := eachErr(a.nodes, Node.Pause)
				if err != nil {
					return "", err
				}
				return perNodeEffect(a.nodes, func(n Node) string {
					return fmt.Sprintf("every thread of %s (pid %d) stopped", n, n.PID())
				}), nil
			},
			undo: func(_ context.Context, nodes []Node) error { return eachErr(nodes, Node.Resume) },
		})
	},
}

var crashMinority = &Scenario{
	Name: "crash-minority",
	span: lasting,
	Doc: "a random minority of the nodes (2 of 5 Redis nodes, 1 of 3 members: any of them, the leader or a priority node included) is " +
		"killed for a lease (at least a second), then restarted with what it persisted",
	Requires: Minority,
	plan: func(e Env) plan {
		return e.drive(strike{
			// The section the strike meets holds for most of its TTL, so
			// that another client can ask for its key while the minority
			// is down and it is still open: the danger window.
			label: "down", lasts: e.window(), hold: e.Spec.TTL * 3 / 4, exclusion: true, danger: true,
			pick: func(context.Context, int) ([]Node, error) { return e.minority(), nil },
			do:   kill,
			undo: startAll,
		})
	},
}

var partition = &Scenario{
	Name: "partition",
	span: cutSpan,
	Doc: "the clients are cut off from a random minority of the nodes, or from the single server, for x leases, by default a lease (at " +
		"least a second), or 4 s from a Sentinel set's master: " +
		"the router between them drops every packet both ways, so neither side gets a clean close (sessions, keepalives and pools behave as " +
		"in a real partition); " +
		"a Sentinel set's sentinels run on the clients' host and are cut off from the master too, so they may fail it over within the window " +
		"(on hosts they sit beside the Redis nodes and keep seeing it; each injection says whether they failed it over)",
	Params:   cutParams,
	check:    checkCut,
	Needs:    Needs{Netns: true},
	Requires: Servers | ClientLinks,
	plan: func(e Env) plan {
		return e.drive(strike{
			label: "cut off from the clients", lasts: e.cut(), exclusion: true,
			pick: func(ctx context.Context, _ int) ([]Node, error) {
				if e.Target.Sentinel != nil {
					// A Sentinel set's clients talk to its master alone: a
					// replica cut off from them cuts no client off.
					l, err := e.Target.leader(ctx)
					return []Node{l}, err
				}
				return e.minority(), nil
			},
			do: func(ctx context.Context, a attempt) (string, error) {
				a.struck()
				if err := eachCap(a.nodes, ClientLinks, ClientCutter.CutClients); err != nil {
					return "", err
				}
				// The proof: a connection from the clients' host times out.
				err := eachCap(a.nodes, ClientLinks, func(c ClientCutter) error { return c.Unreachable(ctx, cutProof) })
				if err != nil {
					return "", fmt.Errorf("a client could still reach its server: %w", err)
				}
				cut := time.Now()
				effect := perNodeEffect(a.nodes, func(n Node) string {
					return fmt.Sprintf("%s unreachable from the clients (a connection timed out after %v)", n, cutProof)
				})
				if s := e.Target.Sentinel; s != nil {
					return effect + "; " + sentinelsThrough(ctx, s, a.nodes[0], cut), nil
				}
				return effect, nil
			},
			undo: func(_ context.Context, nodes []Node) error {
				return eachCap(nodes, ClientLinks, ClientCutter.HealClients)
			},
		})
	},
}

// sentinelFailover is how long a cut of a Sentinel set's master lasts:
// longer than its sentinels, cut off from it with the clients, take to
// promote a replica (measured on lockbench's sets, down-after 1 s: 2.7 to
// 2.9 s after the cut), so that a case measures what a real partition
// leads to rather than one that heals before anything happens.
const sentinelFailover = 4 * time.Second

// cutWindow is how long a partition lasts on a cluster of shape sh, for a
// backend whose lease is lease: a window, or sentinelFailover for a set
// whose leader its nodes do not elect (a Sentinel set's master: its
// sentinels pick it).
func cutWindow(sh Shape, lease time.Duration) time.Duration {
	if sh.Has(Leadership) && !sh.Has(Election) {
		return max(windowFor(sh, lease), sentinelFailover)
	}
	return windowFor(sh, lease)
}

// The cuts (partition, split-view, client-leader) take their length in
// leases as param x, which the envelope's partition families size; a cut
// without it lasts cutWindow.
var cutParams = map[string]string{"x": "how long the cut lasts, in leases (default: a lease, at least a second; 4 s for a Sentinel " +
	"set's master)"}

// checkCut refuses a cut length that is not a positive number of leases.
func checkCut(v url.Values) error { return checkFloat(v, "x") }

// cutLength is how long a cut with params p lasts on a cluster of shape
// sh, for a backend whose lease is lease: x leases, or cutWindow.
func cutLength(p url.Values, sh Shape, lease time.Duration) time.Duration {
	if p.Has("x") {
		return time.Duration(float(p, "x", 1) * float64(lease))
	}
	return cutWindow(sh, lease)
}

// cut is how long e's cut lasts (cutLength).
func (e Env) cut() time.Duration { return cutLength(e.Params, e.Target.Shape(), e.Lease) }

// cutSpan is how long one injection of a cut needs: the cut and half a
// lease after.
func cutSpan(p url.Values, sh Shape, lease time.Duration) time.Duration {
	return cutLength(p, sh, lease) + lease/2
}

// sentinelsThrough watches, until ctx ends (the window of a cut of the
// master's clients), what the sentinels of s make of it: whether they
// promote another node, and when. Where they sit relative to the cut
// (on the clients' host here, on the servers' hosts over an inventory:
// FailoverSet.Side) decides whether they lose the master. It
// says so in words.
func sentinelsThrough(ctx context.Context, s FailoverSet, master Node, cut time.Time) string {
	head := fmt.Sprintf("%s cut off from its clients (the paths between the Redis nodes are not cut); %s", master, s.Side())
	for {
		if addr, err := s.CurrentMaster(ctx); err == nil && addr != master.ServerAddr() {
			name := addr
			if n := s.Node(addr); n != nil {
				name = n.String()
			}
			return fmt.Sprintf("%s, and reported %s as the master %v after the cut: a failover", head, name,
				time.Since(cut).Round(10*time.Millisecond))
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return fmt.Sprintf("%s, and still reported it as the master at the end of the window (%v after the cut): no "+
				"failover", head, time.Since(cut).Round(10*time.Millisecond))
		}
	}
}

// cutProof is how long a connection to a cut node is given to fail: a
// cut drops packets, so it times out; a refused or accepted one is no cut.
const cutProof = 200 * time.Millisecond

var latency = &Scenario{
	Name:     "latency",
	span:     lasting,
	Doc:      "responses from a random minority of the nodes, or from the single server, are delayed by 50 ms for a lease (at least a second)",
	Proxied:  true,
	Requires: Proxy,
	plan: func(e Env) plan {
		return e.drive(strike{
			label: "+50ms", lasts: e.window(),
			pick: func(context.Context, int) ([]Node, error) { return e.minority(), nil },
			do:   proxied(func(p Proxied) error { return p.Delay(50 * time.Millisecond) }, "delay"),
			undo: func(_ context.Context, nodes []Node) error { return eachCap(nodes, Proxy, Proxied.Heal) },
		})
	},
}

var partitionLeader = &Scenario{
	Name: "partition-leader",
	span: lasting,
	Doc: "the ZooKeeper or etcd leader is cut off from the other members (their traffic dropped both ways; clients still reach every " +
		"member) for 2 s, then healed",
	Requires: Election | PeerLinks, QuorumDuration: quorumCase,
	plan: func(e Env) plan {
		return e.peerCut("cut off from the other members", func(ctx context.Context, _ int) ([]Node, error) {
			l, err := e.Target.leader(ctx)
			return []Node{l}, err
		})
	},
}

var partitionHalves = &Scenario{
	Name: "partition-halves",
	span: lasting,
	Doc: "the ZooKeeper or etcd members are split into a random minority and the majority (the leader on either side), which cannot " +
		"reach each other, for 2 s, then healed",
	Requires: Election | PeerLinks, QuorumDuration: quorumCase,
	plan: func(e Env) plan {
		return e.peerCut("split from the majority", func(context.Context, int) ([]Node, error) { return e.minority(), nil })
	},
}

var leaderKill = &Scenario{
	Name:           "leader-kill",
	span:           lasting,
	QuorumDuration: quorumCase,
	Doc:            "the ZooKeeper or etcd leader is killed for 2 s, then restarted with its data",
	Requires:       Election,
	plan: func(e Env) plan {
		return e.drive(strike{
			label: "leader down", lasts: e.window(), exclusion: true,
			pick: func(ctx context.Context, _ int) ([]Node, error) {
				l, err := e.Target.leader(ctx)
				return []Node{l}, err
			},
			do: func(ctx context.Context, a attempt) (string, error) {
				effect, err := kill(ctx, a)
				if err != nil {
					return effect, err
				}
				// Who leads next is what the window measures; a cluster that
				// elects nobody within it was still struck.
				from := time.Now()
				for ctx.Err() == nil {
					if l, err := e.Target.leader(ctx); err == nil && l != nil && l != a.nodes[0] {
						return fmt.Sprintf("%s; %s led %v later", effect, l, time.Since(from).Round(10*time.Millisecond)), nil
					}
					sleepUntil(ctx, time.Now().Add(50*time.Millisecond))
				}
				return effect + "; no other member led within the window", nil
			},
			undo: startAll,
		})
	},
}

// kill kills the nodes at once and says so, with their processes.
func kill(_ context.Context, a attempt) (string, error) {
	pids := make([]int, len(a.nodes))
	for i, n := range a.nodes {
		pids[i] = n.PID()
	}
	a.struck()
	if err := killAll(a.nodes); err != nil {
		return "", err
	}
	var out []string
	for i, n := range a.nodes {
		if n.Running() {
			return "", fmt.Errorf("%s is still running after its kill", n)
		}
		out = append(out, fmt.Sprintf("%s (pid %d) killed", n, pids[i]))
	}
	return strings.Join(out, "; "), nil
}

// proxied is the strike of a fault made in the nodes' proxies (op), read
// back from them: each proxy must have a fault whose name starts with
// want in force.
func proxied(op func(Proxied) error, want string) func(context.Context, attempt) (string, error) {
	return func(ctx context.Context, a attempt) (string, error) {
		a.struck()
		if err := eachCap(a.nodes, Proxy, op); err != nil {
			return "", err
		}
		var out []string
		for _, n := range a.nodes {
			faults, err := n.(Proxied).ProxyFaults(ctx)
			if err != nil {
				return "", err
			}
			ok := false
			for _, f := range faults {
				ok = ok || strings.HasPrefix(f, want)
			}
			if !ok {
				return "", fmt.Errorf("the proxy of %s has no %s in force (%v)", n, want, faults)
			}
			out = append(out, fmt.Sprintf("%s's proxy: %s", n, strings.Join(faults, ", ")))
		}
		return strings.Join(out, "; "), nil
	}
}

// peerCut partitions the picked members from the others, proves that
// each lost its peers (it says so itself, within the window), heals after
// the window, and waits until every member serves again before the next
// injection (a connection that lived through the cut recovers only at its
// next retransmission).
func (e Env) peerCut(label string, pick func(context.Context, int) ([]Node, error)) plan {
	p := e.Target.Members
	return e.drive(strike{
		label: label, lasts: e.window(), exclusion: true, pick: pick,
		do: func(ctx context.Context, a attempt) (string, error) {
			a.struck()
			ordered := time.Now()
			if err := p.Partition(a.nodes); err != nil {
				return "", err
			}
			from := time.Now()
			// On hosts the cut goes in, and is proven, over SSH round
			// trips: a member may notice before Partition returns, so
			// the effect says how long putting the cut in force took.
			took := from.Sub(ordered).Round(10 * time.Millisecond)
			// The members get a whole window from the moment the cut is
			// in force to say they lost their peers: on hosts a cut and
			// its proof are SSH round trips, which a busy machine makes
			// seconds of the window.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.window())
			defer cancel()
			var out []string
			for _, n := range a.nodes {
				var last error
				for {
					if last = p.Isolated(ctx, n); last == nil || ctx.Err() != nil {
						break
					}
					sleepUntil(ctx, time.Now().Add(20*time.Millisecond))
				}
				if last != nil {
					return "", fmt.Errorf("%s did not lose its peers within the window: %w", n, last)
				}
				out = append(out, fmt.Sprintf("%s lost its peers %v after the cut (it says so; putting the cut in force took "+
					"%v)", n, time.Since(from).Round(10*time.Millisecond), took))
			}
			return strings.Join(out, "; "), nil
		},
		undo: func(ctx context.Context, _ []Node) error {
			return errors.Join(p.HealPartition(), p.AwaitServing(ctx))
		},
	})
}

// perNodeEffect joins what each node says.
func perNodeEffect(nodes []Node, say func(Node) string) string {
	var out []string
	for _, n := range nodes {
		out = append(out, say(n))
	}
	return strings.Join(out, "; ")
}
