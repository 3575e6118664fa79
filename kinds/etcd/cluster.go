package etcd

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockbench/lockbench/compose"
)

// Options is what an etcd cluster takes beyond a compose.Spec.
//
// Of a Spec's mechanisms, a cluster takes every one but FakeClock, which
// is an error: a member is a Go program, which reads the clock from the
// vDSO without going through libc, so no preload reaches it (Chaos Mesh's
// TimeChaos patches the vDSO instead); its leases count down on the
// leader's monotonic clock anyway, which a wall-clock jump does not move.
// With Netns each member listens on the standard ports 2379 (clients)
// and 2380 (peers) of its address. Placed on hosts (On), each member
// listens on its host's address at the placement's Port (clients) and
// first PeerPort (peers, 2380 if none), and keeps its data under the
// placement's Dir; Binary must name the etcd-member program on the host
// (a run over an inventory uploads this machine's there).
type Options struct {
	// HeartbeatInterval is the members' raft heartbeat; 0 means 50 ms.
	HeartbeatInterval time.Duration
	// ElectionTimeout is how long a follower waits for a heartbeat before
	// it calls an election; 0 means 300 ms, so that a new leader is
	// elected well within a second of a leader's death.
	ElectionTimeout time.Duration
	// LogLevel is the members' log level (debug, info, warn, error); ""
	// means warn.
	LogLevel string
}

// Rules are what an etcd cluster accepts of a compose.Spec. Its durable
// profile fdatasyncs the WAL before a write is acknowledged (bbolt
// commits, with an fdatasync, every 100 ms); its fast one is
// --unsafe-no-fsync, neither the WAL nor bbolt.
var Rules = compose.Rules{
	Nodes: "etcd members", Min: 1, Odd: true, Durability: compose.DurabilityDurable,
	NoPeriodic:  "a member fdatasyncs its WAL at every raft write or never (--unsafe-no-fsync)",
	NoFakeClock: "no clock preload reaches a Go program, which reads its clocks through the vDSO, not libc",
}

// Cluster is a cluster of etcd members, each a process of
// cmd/etcd-member.
type Cluster struct {
	// Nodes are the members, in --initial-cluster order.
	Nodes []*compose.Node

	peers    *compose.Peers // what Partition cuts with
	dataDirs []string       // each member's data dir, on its host
}

// StartCluster starts a cluster of s.Nodes members in env (an odd
// number) and waits until each reports itself healthy on /health, which
// a member does once the cluster has a leader and it can serve a
// linearizable read.
//
// A member restarted without its data (Node.Restart(ctx, false)) cannot
// rejoin as itself — etcd refuses a member that was bootstrapped before —
// so it is replaced, as an operator would do it: the old member is
// removed, a new one added at the same addresses through the others, and
// the node starts as that new member, which receives the cluster's data
// from the leader. This needs a quorum of the others, and a cluster whose
// leader has been connected to a quorum for 5 s (a younger one delays the
// restart until then).
//
// The member binary is found once per process: $LOCKBENCH_ETCD_MEMBER
// (MemberEnv; the Makefile points it at bin/etcd-member, which `make
// build` refreshes), else etcd-member next to the running executable or
// to $LOCKBENCH_BINARY; nothing is built at run time, and without one the
// error says where it looked.
func StartCluster(ctx context.Context, env *compose.Env, s compose.Spec, o Options) (*Cluster, error) {
	s, err := s.Resolve(Rules)
	if err != nil {
		return nil, err
	}
	n := s.Nodes
	hb := cmp.Or(o.HeartbeatInterval, 50*time.Millisecond)
	el := cmp.Or(o.ElectionTimeout, 300*time.Millisecond)
	if hb < time.Millisecond || el < 5*hb {
		return nil, fmt.Errorf("etcd: heartbeat %v, election timeout %v: want a heartbeat of 1ms or more and an election timeout of at "+
			"least 5 heartbeats", hb, el)
	}
	level := cmp.Or(o.LogLevel, "warn")
	switch level {
	case "debug", "info", "warn", "error":
	default:
		return nil, fmt.Errorf("etcd: log level %q: want debug, info, warn or error", level)
	}
	var bin string
	if s.On == nil {
		if bin, err = memberBinary(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{}
	var l compose.Layout
	if s.On != nil {
		if l, err = compose.LayOutOn("etcd", s.On, 2380); err != nil {
			return nil, err
		}
		for _, p := range l.Places {
			if p.Binary == "" {
				return nil, fmt.Errorf("etcd: member placed on %s: no Binary (the etcd-member program on the host)", p.Host.Name())
			}
		}
	} else if l, err = env.LayOut(n, s.Netns, 2379, 2380); err != nil { // client, peer
		return nil, err
	}
	hosts := l.Hosts
	names := env.NewNames("etcd", n)
	cluster := make([]string, n)
	for i, name := range names {
		cluster[i] = fmt.Sprintf("%s=http://%s", name, compose.HostAddr(hosts[i], l.Ports[i][1]))
	}
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	specs := make([]compose.NodeSpec, n)
	for i, name := range names {
		client, peer := l.Ports[i][0], "http://"+compose.HostAddr(hosts[i], l.Ports[i][1])
		specs[i] = compose.NodeSpec{Name: name, Port: client, Binary: bin}
		l.Place(&specs[i], i)
		if l.Places != nil {
			specs[i].Binary = l.Places[i].Binary
		}
		dataDir := path.Join(env.NodeDir(specs[i]), "data")
		c.dataDirs = append(c.dataDirs, dataDir)
		initial, state, started := strings.Join(cluster, ","), "new", false
		// A member restarted without its data cannot rejoin as itself
		// ("already bootstrapped"): as an operator would, it is replaced
		// by a new member at the same address.
		specs[i].Prepare = func(ctx context.Context, n *compose.Node) error {
			kept, err := n.Exists(ctx, dataDir)
			if err != nil {
				return err
			}
			if kept || !started {
				started = true
				return nil
			}
			if err := c.othersHaveQuorum(ctx, i); err != nil {
				return fmt.Errorf("etcd: member %s lost its data and cannot be replaced: %w", name, err)
			}
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			members, err := c.replaceMember(ctx, i, name, peer)
			if err != nil {
				return err
			}
			initial, state = members, "existing"
			return nil
		}
		specs[i].Argv = func() []string {
			return []string{
				"--name", name,
				"--data-dir", dataDir,
				"--listen-client-url", "http://" + compose.HostAddr(hosts[i], client),
				"--listen-peer-url", peer,
				"--initial-cluster", initial,
				"--initial-cluster-state", state,
				"--initial-cluster-token", "lockbench-" + hex.EncodeToString(token),
				"--heartbeat-interval", fmt.Sprint(hb.Milliseconds()),
				"--election-timeout", fmt.Sprint(el.Milliseconds()),
				"--log-level", level,
				fmt.Sprintf("--unsafe-no-fsync=%v", s.Durability == compose.DurabilityFast),
			}
		}
		specs[i].Ready = func(ctx context.Context) error { return healthy(ctx, compose.HostAddr(hosts[i], client)) }
	}
	nodes, err := env.StartNodes(ctx, s, specs)
	if err != nil {
		return nil, err
	}
	c.Nodes = nodes
	if c.peers, err = env.NewPeers("etcd cluster", l, nodes); err != nil {
		return nil, err
	}
	return c, nil
}

// othersHaveQuorum answers nil when a quorum of the cluster's members
// other than Nodes[self] have their data, which replacing it needs (they
// must run too: replaceMember waits for them). Members that lost
// their data are no longer members: a majority of them has lost the
// cluster, which only an operator's disaster recovery brings back (a
// snapshot restored with etcdutl, or --force-new-cluster on a survivor,
// which keeps what the survivor had).
func (c *Cluster) othersHaveQuorum(ctx context.Context, self int) error {
	kept := 0
	for i, dir := range c.dataDirs {
		if i == self {
			continue
		}
		ok, err := c.Nodes[i].Exists(ctx, dir)
		if err != nil {
			return err
		}
		if ok {
			kept++
		}
	}
	if quorum := len(c.dataDirs)/2 + 1; kept < quorum {
		return fmt.Errorf("%d of the other %d members have their data, and the cluster's quorum is %d: a majority that lost its data has lost "+
			"the cluster (restore a snapshot, or --force-new-cluster on a survivor)",
			kept, len(c.dataDirs)-1, quorum)
	}
	return nil
}

// replaceMember removes the member at peer URL peer from the cluster and
// adds a new one there, through the other members, and returns the
// --initial-cluster the new member (Nodes[self], named name) starts with.
func (c *Cluster) replaceMember(ctx context.Context, self int, name, peer string) (string, error) {
	type member struct {
		ID       string   `json:"ID"`
		Name     string   `json:"name"`
		PeerURLs []string `json:"peerURLs"`
	}
	var members []member
	var newID string
	// A cluster refuses a new member (unhealthy cluster) until its leader
	// has been connected to a quorum for 5 s: retry, and reuse a member
	// added by an attempt whose answer was lost.
	err := compose.Poll(ctx, time.Minute, func(ctx context.Context) error {
		var errs []error
		for i, n := range c.Nodes {
			if i == self {
				continue
			}
			at := n.ServerAddr()
			err := func() error {
				var list struct{ Members []member }
				if err := call(ctx, at, "/v3/cluster/member/list", struct{}{}, &list); err != nil {
					return err
				}
				for _, m := range list.Members {
					if !slices.Contains(m.PeerURLs, peer) {
						continue
					}
					if m.Name == "" { // added, never started
						members, newID = list.Members, m.ID
						return nil
					}
					if err := call(ctx, at, "/v3/cluster/member/remove", map[string]string{"ID": m.ID}, nil); err != nil {
						return err
					}
				}
				var added struct {
					Member  member
					Members []member
				}
				if err := call(ctx, at, "/v3/cluster/member/add", map[string][]string{"peerURLs": {peer}}, &added); err != nil {
					return err
				}
				members, newID = added.Members, added.Member.ID
				return nil
			}()
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", n.Name, err))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return "", fmt.Errorf("etcd: replace etcd member %s at %s: %w", name, peer, err)
	}
	var initial []string
	for _, m := range members {
		mname := m.Name
		if m.ID == newID {
			mname = name
		}
		for _, u := range m.PeerURLs {
			initial = append(initial, mname+"="+u)
		}
	}
	return strings.Join(initial, ","), nil
}

// call posts req as JSON to the member's gRPC gateway at path and
// decodes the answer into resp (unless nil). Unlike a gRPC client it fails
// at once on a member that is down.
func call(ctx context.Context, addr, path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	out, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s at %s: %w", path, addr, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s at %s: %s: %s", path, addr, res.Status, bytes.TrimSpace(out))
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(out, resp); err != nil {
		return fmt.Errorf("%s at %s: %w", path, addr, err)
	}
	return nil
}

// healthy answers nil when GET /health at addr reports health true.
func healthy(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("/health at %s: %s: %w", addr, resp.Status, err)
	}
	if h.Health != "true" {
		return fmt.Errorf("/health at %s: %s %s", addr, h.Health, h.Reason)
	}
	return nil
}

// Endpoints returns the addresses clients should use (the proxies when the
// cluster is Proxied), as clientv3.Config.Endpoints accepts them.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		eps[i] = n.Addr()
	}
	return eps
}

// status is what a member says of itself and its leader
// (/v3/maintenance/status): their ids, "" or "0" for no leader.
type status struct {
	Header struct {
		MemberID string `json:"member_id"`
	} `json:"header"`
	Leader   string `json:"leader"`
	RaftTerm string `json:"raftTerm"`
}

// memberStatus asks the member at addr for its status.
func memberStatus(ctx context.Context, addr string) (status, error) {
	var st status
	err := call(ctx, addr, "/v3/maintenance/status", struct{}{}, &st)
	return st, err
}

// Leader returns the member that leads the cluster: of the members that
// answer a status request within a second and report themselves leader,
// the one with the highest raft term. Killed or paused members are
// skipped; it is an error if none leads.
func (c *Cluster) Leader(ctx context.Context) (*compose.Node, error) {
	leader, err := compose.LeaderOf(ctx, c.Nodes, func(ctx context.Context, i int) (bool, uint64, error) {
		st, err := memberStatus(ctx, c.Nodes[i].ServerAddr())
		if err != nil {
			return false, 0, err
		}
		term, _ := strconv.ParseUint(st.RaftTerm, 10, 64)
		return st.Leader != "" && st.Leader == st.Header.MemberID, term, nil
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: no etcd leader: %w", err)
	}
	return leader, nil
}

// AwaitLeader waits until a member other than old (which may be nil) leads
// the cluster and returns it: what a leader-kill fault waits for. ctx
// bounds the wait; without a deadline it is one minute.
func (c *Cluster) AwaitLeader(ctx context.Context, old *compose.Node) (*compose.Node, error) {
	return compose.AwaitLeader(ctx, "etcd", c.Leader, old)
}

// Partition cuts the members into groups that cannot reach each other, as
// Peers.Partition does (see there): the cluster must have been started
// with Netns or on hosts (Spec.On), each member on a host of its own.
func (c *Cluster) Partition(groups ...[]*compose.Node) error { return c.peers.Partition(groups...) }

// HealPartition lifts the partition in force, if any (Peers.Heal).
func (c *Cluster) HealPartition() error { return c.peers.Heal() }

// PartitionLeader cuts the current leader off from every other member
// (clients still reach it) and returns it: it can no longer commit
// anything, and the majority elects a new leader.
func (c *Cluster) PartitionLeader(ctx context.Context) (*compose.Node, error) {
	return c.peers.PartitionLeader(ctx, c.Leader)
}

// AwaitServing waits until every running member serves clients again, as
// after HealPartition or Resume: ctx bounds the wait, and each member may
// take ReadyTimeout.
func (c *Cluster) AwaitServing(ctx context.Context) error { return c.peers.AwaitServing(ctx) }

// Isolated returns nil when member n of the cluster says it has no leader
// (its status: a leader cut off from the majority steps down within an
// election timeout, as raft's CheckQuorum makes it, and a follower cut off
// gives its leader up when it stands for election), and an error naming
// the leader it still follows otherwise: the proof that a partition
// between members took.
func (c *Cluster) Isolated(ctx context.Context, n *compose.Node) error {
	ctx, cancel := compose.WithDefaultTimeout(ctx, time.Second)
	defer cancel()
	st, err := memberStatus(ctx, n.ServerAddr())
	if err != nil {
		return fmt.Errorf("etcd: %s: %w", n.Name, err)
	}
	if st.Leader == "" || st.Leader == "0" {
		return nil
	}
	if st.Leader == st.Header.MemberID {
		return fmt.Errorf("etcd: %s still leads (term %s)", n.Name, st.RaftTerm)
	}
	return fmt.Errorf("etcd: %s still follows leader %s (term %s)", n.Name, st.Leader, st.RaftTerm)
}
