package compose

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxies are the Env's proxies: those of its in-process Toxiproxy
// server (created on first use) and those it runs beside placed servers.
type proxies struct {
	srv *toxiproxy.ApiServer
	mu  sync.Mutex
	all []*Proxy
}

// close stops every proxy: an in-process one at once, one on a host by
// its pidfile.
func (p *proxies) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var errs []error
	for _, x := range p.all {
		if x.placed != nil {
			errs = append(errs, x.placed.stop(ctx))
			continue
		}
		x.p.Stop()
	}
	return errors.Join(errs...)
}

// addProxy registers x with e, whose Close stops it.
func (e *Env) addProxy(x *Proxy) {
	e.mu.Lock()
	if e.proxies == nil {
		e.proxies = &proxies{}
	}
	px := e.proxies
	e.mu.Unlock()
	px.mu.Lock()
	px.all = append(px.all, x)
	px.mu.Unlock()
}

// Proxy is a TCP proxy placed in front of a server (between clients and a
// node, or between a Redis master and its replica) that can cut or slow
// the traffic through it: in this process (Env.Proxy), or beside a
// server placed on a host (PlacedProxy), controlled through its API over
// the host's Remote. Its controls are safe for concurrent use.
type Proxy struct {
	// Name identifies the proxy.
	Name string
	// Upstream is the address the proxy forwards to.
	Upstream string

	p      *toxiproxy.Proxy // in this process
	port   int
	placed *placedProxy // on a host instead
}

// Proxy starts a proxy on a free port of 127.0.0.1 that forwards to
// upstream. It lives until the Env is closed.
func (e *Env) Proxy(name, upstream string) (*Proxy, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("compose: env %s is closed", e.Dir)
	}
	if e.proxies == nil {
		e.proxies = &proxies{}
	}
	px := e.proxies
	e.mu.Unlock()
	px.mu.Lock()
	if px.srv == nil {
		px.srv = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	}
	px.mu.Unlock()

	// A process that does not claim its ports (see freePorts) may take
	// ours between the check and the listen: draw another.
	var (
		p    *toxiproxy.Proxy
		port int
	)
	for try := 0; ; try++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		port = ports[0]
		p = toxiproxy.NewProxy(px.srv, name, addr(port), upstream)
		err = p.Start()
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == 4 {
			return nil, fmt.Errorf("compose: proxy %s -> %s: %w", name, upstream, err)
		}
	}
	x := &Proxy{Name: name, Upstream: upstream, p: p, port: port}
	e.addProxy(x)
	return x, nil
}

// Addr is the address to dial instead of Upstream.
func (x *Proxy) Addr() string {
	if x.placed != nil {
		return x.placed.addr
	}
	return addr(x.port)
}

// Pidfile is the pidfile of a proxy beside a placed server, on its host
// (the only way its process is found), or "" for one in this process.
func (x *Proxy) Pidfile() string {
	if x.placed == nil {
		return ""
	}
	return x.placed.proc.Pidfile
}

// Port is the port the proxy listens on (on its host's address, for a
// proxy beside a placed server): what a cut of the clients must cut too.
func (x *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(x.Addr())
	p, _ := strconv.Atoi(port)
	return p
}

// Partition blackholes the traffic in both directions: connections stay
// open but nothing gets through, so a client sees timeouts, as in a real
// network partition, rather than refused connections.
func (x *Proxy) Partition() error {
	for _, stream := range []string{"upstream", "downstream"} {
		if err := x.add("partition-"+stream, "timeout", stream, `{"timeout":0}`); err != nil {
			return err
		}
	}
	return nil
}

// Delay adds d of latency to every response that passes the proxy.
func (x *Proxy) Delay(d time.Duration) error {
	return x.add("delay", "latency", "downstream", fmt.Sprintf(`{"latency":%d}`, d.Milliseconds()))
}

// Heal removes every fault from the proxy. Connections that lost data
// while partitioned are not repaired; clients reconnect.
func (x *Proxy) Heal() error {
	if x.placed != nil {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := x.placed.reset(ctx); err != nil {
			return fmt.Errorf("compose: proxy %s: heal: %w", x.Name, err)
		}
		return nil
	}
	x.p.Toxics.ResetToxics(context.Background())
	return nil
}

func (x *Proxy) add(name, typ, stream, attrs string) error {
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	var err error
	if x.placed != nil {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		err = x.placed.add(ctx, x.Name, name, []byte(js))
	} else {
		// Replace a fault of the same name rather than fail on it.
		_ = x.p.Toxics.RemoveToxic(context.Background(), name)
		_, err = x.p.Toxics.AddToxicJson(strings.NewReader(js))
	}
	if err != nil {
		return fmt.Errorf("compose: proxy %s: add %s: %w", x.Name, name, err)
	}
	return nil
}

// Proxy returns the proxy in front of the node, or nil if the node was
// started without one.
func (n *Node) Proxy() *Proxy { return n.proxy }

// HasProxy reports whether the node was started behind a proxy, which
// Delay, Partition and Heal act through.
func (n *Node) HasProxy() bool { return n.proxy != nil }

// ProxyFaults lists the faults in force on the node's proxy (see
// Proxy.Faults): what a fault made through the proxy is read back from.
func (n *Node) ProxyFaults(ctx context.Context) ([]string, error) {
	if n.proxy == nil {
		return nil, fmt.Errorf("compose: %s has no proxy", n.Name)
	}
	return n.proxy.Faults(ctx)
}

// Partition cuts clients off from the node through its proxy (see
// Proxy.Partition): the proxy keeps every client's TCP connection open,
// so no session, keepalive or pool notices; CutClients cuts for real. The
// node must have been started behind a proxy.
func (n *Node) Partition() error {
	if n.proxy == nil {
		return fmt.Errorf("compose: %s has no proxy to partition", n.Name)
	}
	return n.proxy.Partition()
}

// Heal undoes Partition and Delay.
func (n *Node) Heal() error {
	if n.proxy == nil {
		return fmt.Errorf("compose: %s has no proxy to heal", n.Name)
	}
	return n.proxy.Heal()
}

// Delay slows every response from the node by d.
func (n *Node) Delay(d time.Duration) error {
	if n.proxy == nil {
		return fmt.Errorf("compose: %s has no proxy to delay", n.Name)
	}
	return n.proxy.Delay(d)
}
