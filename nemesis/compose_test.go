package nemesis_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/internal/server"
	"github.com/lockbench/lockbench/kinds"
	"github.com/lockbench/lockbench/kinds/etcd"
	"github.com/lockbench/lockbench/kinds/sentinel"
	"github.com/lockbench/lockbench/kinds/zookeeper"
	"github.com/lockbench/lockbench/nemesis"
)

// compose's servers are targets as they are: its node is a nemesis.Node
// with every capability (whether a node has one is its Has method's
// answer), and its clusters' controls, wrapped by kinds, are the
// nemesis's. A capability compose stopped implementing would otherwise
// vanish from every shape at run time, and its faults with it.
var (
	_ nemesis.Node         = (*compose.Node)(nil)
	_ nemesis.ClientCutter = (*compose.Node)(nil)
	_ nemesis.Proxied      = (*compose.Node)(nil)
	_ nemesis.Clock        = (*compose.Node)(nil)
	_ nemesis.Disk         = (*compose.Node)(nil)
	_ nemesis.PeerMember   = (*compose.Node)(nil)
	_ nemesis.Placed       = (*compose.Node)(nil)

	_ nemesis.Leader      = kinds.Leads((*etcd.Cluster)(nil))
	_ nemesis.Leader      = kinds.Leads((*zookeeper.Ensemble)(nil))
	_ nemesis.Leader      = kinds.Leads((*sentinel.Set)(nil))
	_ nemesis.FailoverSet = sentinel.FailoverSet{}
	_ nemesis.ClientNet   = kinds.ClientNet{}
)

// process is a node of no server kind: a process and nothing more.
type process struct{ name string }

func (p *process) String() string                  { return p.name }
func (p *process) ServerAddr() string              { return "127.0.0.1:1" }
func (p *process) PID() int                        { return 0 }
func (p *process) Running() bool                   { return true }
func (p *process) Start(ctx context.Context) error { return nil }
func (p *process) Stop() error                     { return nil }
func (p *process) Kill() error                     { return nil }
func (p *process) Pause() error                    { return nil }
func (p *process) Resume() error                   { return nil }

// clocked is a process under a clock preload, which it may lack.
type clocked struct {
	process
	fake bool
}

func (c *clocked) HasFakeClock() bool                            { return c.fake }
func (c *clocked) JumpClock(time.Duration) error                 { return nil }
func (c *clocked) SetClockRate(float64) error                    { return nil }
func (c *clocked) ServerTime(context.Context) (time.Time, error) { return time.Now(), nil }
func (c *clocked) PowerLoss() (server.Unsynced, error)           { return server.Unsynced{}, nil }
func (c *clocked) HasLazyFS() bool                               { return false }

// TestShapeFromCapabilities: a target's shape is what its nodes offer, by
// the interfaces they implement and what those say of them — a node of
// any kind, not only compose's, can be a target.
func TestShapeFromCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []nemesis.Node
		has   nemesis.Capability
		lacks nemesis.Capability
	}{
		{"processes", []nemesis.Node{&process{"a"}, &process{"b"}, &process{"c"}},
			nemesis.Servers | nemesis.Minority,
			nemesis.ClientLinks | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock | nemesis.ClientNets},
		{"clocks", []nemesis.Node{&clocked{process{"a"}, true}, &clocked{process{"b"}, true}},
			nemesis.Servers | nemesis.MovableClock, nemesis.Minority | nemesis.LosableData | nemesis.Proxy},
		{"one clock short", []nemesis.Node{&clocked{process{"a"}, true}, &clocked{process{"b"}, false}},
			nemesis.Servers, nemesis.MovableClock},
		{"compose nodes started without mechanisms", []nemesis.Node{&compose.Node{Name: "a"}},
			nemesis.Servers, nemesis.ClientLinks | nemesis.Proxy | nemesis.LosableData | nemesis.MovableClock | nemesis.ClientNets},
	} {
		sh := nemesis.Target{Nodes: tc.nodes}.Shape()
		if !sh.Has(tc.has) || sh.Caps&tc.lacks != 0 {
			t.Errorf("%s: shape %v, want %v and none of %v", tc.name, sh.Caps, tc.has, tc.lacks)
		}
	}
}
