package compose

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/lockbench/lockbench/remote"
)

// PlacedProxy puts a proxy beside a placed server, on the server's host,
// as Jepsen runs a tool on its nodes: lockbench's hidden proxy command
// (ProxyMain: the same Toxiproxy server that Env.Proxy runs in process
// here) listens on the placement's address at Port and forwards to the
// server, so that the clients on other hosts reach the server through it
// and a latency fault slows them (a kernel without the netem qdisc, as
// here and on many VMs, can slow a link no other way). Its control API
// listens on the host's loopback only: the control node reaches it
// through the SSH connection (remote.Remote's Dial), never over the
// network, where anyone could add a fault.
//
// The placement's Lockbench runs it (`lockbench proxy`).
type PlacedProxy struct {
	// Port is the proxy's port on the placement's Addr.
	Port int
}

// check says what is wrong with x, beside a server at port whose peers
// use peers, run by the lockbench binary at lockbench on the host.
func (x *PlacedProxy) check(port int, peers []int, lockbench string) error {
	var errs []error
	if x.Port < 1 || x.Port > 65535 || x.Port == port {
		errs = append(errs, fmt.Errorf("proxy port %d: want 1 to 65535, other than the server's %d", x.Port, port))
	}
	for _, q := range peers {
		if q == x.Port {
			errs = append(errs, fmt.Errorf("proxy port %d is also a peer port", x.Port))
		}
	}
	if !path.IsAbs(lockbench) {
		errs = append(errs, fmt.Errorf("a proxy needs the lockbench binary on the host (Lockbench %q: want an absolute path)", lockbench))
	}
	return errors.Join(errs...)
}

// ProxyMain runs one proxy until ctx ends: `lockbench proxy` on a server's
// host (PlacedProxy), started by compose with a pidfile. Its args are
// flags: --name (the proxy's name in its API), --listen (host:port where
// clients connect), --upstream (the server, host:port), --api (where its
// Toxiproxy API listens: a loopback address, port 0 for any free one) and
// --api-file (where the API's address is written once it listens, which
// is how the control node finds it). An API address beyond loopback is
// refused: whoever reaches it can cut or slow the server.
func ProxyMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "proxy", "the proxy's name in its API")
	listen := fs.String("listen", "", "host:port where clients connect")
	upstream := fs.String("upstream", "", "host:port of the server")
	api := fs.String("api", "127.0.0.1:0", "loopback host:port of the control API")
	apiFile := fs.String("api-file", "", "file the API's address is written to")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("proxy: unexpected arguments %q", fs.Args())
	}
	if *listen == "" || *upstream == "" || *apiFile == "" {
		return errors.New("proxy: --listen, --upstream and --api-file are needed")
	}
	ap, err := netip.ParseAddrPort(*api)
	if err != nil || !ap.Addr().IsLoopback() {
		return fmt.Errorf("proxy: --api %q: want a loopback address and port (the API must not be open to the network)", *api)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, *name, *listen, *upstream)
	if err := srv.Collection.Add(p, true); err != nil {
		return fmt.Errorf("proxy %s -> %s: %w", *listen, *upstream, err)
	}
	defer p.Stop()
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return fmt.Errorf("proxy: API: %w", err)
	}
	hs := &http.Server{Handler: srv.Routes(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	// Whole or not at all: the control node polls for it.
	tmp := *apiFile + ".tmp"
	if err := errors.Join(os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o600), os.Rename(tmp, *apiFile)); err != nil {
		hs.Close()
		return fmt.Errorf("proxy: API address: %w", err)
	}
	select {
	case err := <-served:
		return fmt.Errorf("proxy: API: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	}
}

// placedProxy is the control node's handle on a proxy that runs on a
// placed server's host: its process (by pidfile) and its API, reached
// through the host's Remote.
type placedProxy struct {
	host    remote.Remote
	addr    string // where clients reach it
	proc    remote.Proc
	apiFile string
	log     string
	http    *http.Client
}

// placedProxy starts the proxy beside placed node n (its Placement's
// Proxy) and waits until its API answers. A proxy an earlier run left
// (its pidfile names a live process) is killed first.
func (e *Env) placedProxy(ctx context.Context, n *Node) (*Proxy, error) {
	pl := n.spec.place
	pidfile, apiFile, log := ProxyFiles(pl.Dir)
	x := &placedProxy{
		host:    pl.Host,
		addr:    net.JoinHostPort(pl.Addr.String(), strconv.Itoa(pl.Proxy.Port)),
		proc:    remote.Proc{Remote: pl.Host, Pidfile: pidfile},
		apiFile: apiFile,
		log:     log,
	}
	name := n.Name + "-proxy"
	d := remote.Daemon{
		Path: pl.Lockbench,
		Args: []string{"proxy", "--name", name, "--listen", x.addr, "--upstream", n.ServerAddr(),
			"--api", "127.0.0.1:0", "--api-file", x.apiFile},
		Pidfile: x.proc.Pidfile, Log: x.log,
	}
	if err := pl.Host.Run(ctx, remote.Cmd{Path: "rm", Args: []string{"-f", "--", x.apiFile}}); err != nil {
		return nil, fmt.Errorf("compose: proxy of %s: %w", n.Name, err)
	}
	proc, err := startAfresh(ctx, pl.Host, d)
	if err != nil {
		return nil, fmt.Errorf("compose: start the proxy of %s on %s: %w", n.Name, pl.Host.Name(), err)
	}
	x.proc = proc
	px := &Proxy{Name: name, Upstream: n.ServerAddr(), placed: x}
	e.addProxy(px) // from now on Env.Close stops it
	if err := x.await(ctx, name); err != nil {
		return nil, fmt.Errorf("compose: the proxy of %s on %s: %w; log:\n%s", n.Name, pl.Host.Name(), err, logTail(pl.Host, x.log, 1024))
	}
	return px, nil
}

// await waits until the proxy has written its API's address and the API
// knows the proxy, or ReadyTimeout passes, or the process exits.
func (x *placedProxy) await(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = x.connect(ctx); last == nil {
			_, last = x.toxics(ctx, name)
			if last == nil {
				return nil
			}
		}
		if st, err := x.proc.State(ctx); err == nil && st == remote.Gone {
			return fmt.Errorf("it %w (%v)", ErrExited, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w (last: %v)", ErrNotReady, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// connect reads the API's address from its file, once, and makes the
// HTTP client that reaches it through the host.
func (x *placedProxy) connect(ctx context.Context) error {
	if x.http != nil {
		return nil
	}
	out, err := remote.Output(ctx, x.host, "cat", "--", x.apiFile)
	if err != nil {
		return err
	}
	api, err := netip.ParseAddrPort(strings.TrimSpace(string(out)))
	if err != nil || !api.Addr().IsLoopback() {
		return fmt.Errorf("API address %q: want one on the host's loopback", out)
	}
	x.http = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return x.host.Dial(ctx, "tcp", api.String())
		},
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
	}}
	return nil
}

// call sends one API request (body JSON, or nil) and decodes the answer
// into out, if out is not nil.
func (x *placedProxy) call(ctx context.Context, method, p string, body []byte, out any) error {
	if err := x.connect(ctx); err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	// The host in the URL is never dialled: the transport goes through
	// the host's Remote to the API's loopback address.
	req, err := http.NewRequestWithContext(ctx, method, "http://proxy-api"+p, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := x.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, p, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// toxicView is a toxic as the API shows it.
type toxicView struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Attributes struct {
		Latency int64 `json:"latency"`
	} `json:"attributes"`
}

// toxics lists the toxics in force on the proxy called name.
func (x *placedProxy) toxics(ctx context.Context, name string) ([]toxicView, error) {
	var out []toxicView
	err := x.call(ctx, http.MethodGet, "/proxies/"+url.PathEscape(name)+"/toxics", nil, &out)
	return out, err
}

// add puts a toxic (its JSON) in force on the proxy called name,
// replacing one of the same name.
func (x *placedProxy) add(ctx context.Context, name, toxic string, js []byte) error {
	p := "/proxies/" + url.PathEscape(name) + "/toxics"
	if err := x.call(ctx, http.MethodDelete, p+"/"+url.PathEscape(toxic), nil, nil); err != nil && !strings.Contains(err.Error(), "404") {
		return err
	}
	return x.call(ctx, http.MethodPost, p, js, nil)
}

// reset removes every toxic.
func (x *placedProxy) reset(ctx context.Context) error {
	return x.call(ctx, http.MethodPost, "/reset", nil, nil)
}

// stop kills the proxy by its pidfile and removes its files (its log
// too: a proxy that failed to start said why in its start's error).
func (x *placedProxy) stop(ctx context.Context) error {
	if x.http != nil {
		x.http.CloseIdleConnections()
	}
	err := x.proc.Kill(ctx)
	if err == nil {
		err = x.host.Run(ctx, remote.Cmd{Path: "rm", Args: []string{"-f", "--", x.apiFile, x.proc.Pidfile, x.log}})
	}
	if err != nil {
		return fmt.Errorf("compose: stop the proxy %s: %w", x.proc, err)
	}
	return nil
}

// ProxyFiles are the files the proxy beside a server whose data dir on
// its host is dir keeps there: its pidfile, its API's address and its
// log. A run whose link to the host broke names the pidfile as left.
func ProxyFiles(dir string) (pidfile, apiFile, log string) {
	dir = filepath.Clean(dir)
	return dir + ".proxy.pid", dir + ".proxy.api", dir + ".proxy.log"
}
