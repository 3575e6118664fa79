package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"sync"

	"github.com/lockbench/lockbench/compose"
)

// splitClients are the client namespaces of a case whose fault cuts
// clients one by one (nemesis.Scenario.SplitNets): one per worker, on the
// peer network of the case's nodes, and a relay that lets the workers
// reach the judge from there.
//
// The judge listens on loopback, which a client namespace does not reach;
// the relay listens on this host's address on the nodes' network (which
// only this machine's namespaces reach, not another host) and passes each
// connection to the judge unchanged, so the judge's rules (its token on a
// run over hosts) still apply.
type splitClients struct {
	nodes []*compose.Node
	nets  []*compose.ClientNet
	relay net.Listener
	judge string

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// newSplitClients opens the relay to judge for the namespaces of nodes'
// network.
func newSplitClients(nodes []*compose.Node, judge string) (*splitClients, error) {
	first, err := compose.NewClientNet(nodes)
	if err != nil {
		return nil, err
	}
	s := &splitClients{nodes: nodes, nets: []*compose.ClientNet{first}, judge: judge, conns: map[net.Conn]bool{}}
	s.relay, err = net.Listen("tcp", net.JoinHostPort(first.HostAddr().String(), "0"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("judge relay for client namespaces: %w", err), first.Close())
	}
	s.wg.Go(s.serve)
	return s, nil
}

// JudgeAddr is where a worker of a client namespace reaches the judge.
func (s *splitClients) JudgeAddr() string { return s.relay.Addr().String() }

// start starts cmd in the i-th client namespace (i counts from 0, in
// order), making it.
func (s *splitClients) start(i int, cmd *exec.Cmd) (*compose.ClientNet, error) {
	for len(s.nets) <= i {
		cn, err := compose.NewClientNet(s.nodes)
		if err != nil {
			return nil, err
		}
		s.nets = append(s.nets, cn)
	}
	return s.nets[i], s.nets[i].Start(cmd)
}

func (s *splitClients) serve() {
	for {
		c, err := s.relay.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Go(func() { s.pass(c) })
	}
}

// pass relays one connection to the judge and back.
func (s *splitClients) pass(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	j, err := net.Dial("tcp", s.judge)
	if err != nil {
		return
	}
	defer j.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(j, c)
		_ = j.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(c, j)
	_ = c.(*net.TCPConn).CloseWrite()
	<-done
}

// Close stops the relay, drops its connections and frees the namespaces.
func (s *splitClients) Close() error {
	errs := []error{s.relay.Close()}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	for _, cn := range s.nets {
		errs = append(errs, cn.Close())
	}
	return errors.Join(errs...)
}
