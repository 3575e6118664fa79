package judge

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/history"
)

// The wire protocol: JSON lines over TCP, one request and one reply at a
// time per connection. A client process has its own connection, which
// starts with hello; a runner's connection carries open, finish, gone and
// stop, and a remote nemesis's (RemotePeer) its queries of the live view
// and its injections; a nemesis's hooks connection (op hooks) turns the
// other way: the judge calls, the peer answers. Every reply carries the judge's wall clock, from which a client
// bounds the offset between its clock and the judge's.

type request struct {
	Op string `json:"op"`
	// Token is the run's token, on a connection's first request.
	Token   string       `json:"token,omitempty"`
	Case    string       `json:"case,omitempty"`
	Host    string       `json:"host,omitempty"`
	Process int          `json:"process,omitempty"`
	PID     int          `json:"pid,omitempty"`
	Spec    *CaseSpec    `json:"spec,omitempty"`
	Grant   *GrantReport `json:"grant,omitempty"`
	Section int64        `json:"section,omitempty"`
	Report  *OpReport    `json:"report,omitempty"`
	Metrics *Metrics     `json:"metrics,omitempty"`
	Why     string       `json:"why,omitempty"`
	// A remote peer's requests (RemotePeer): a pause's length and point,
	// the nemesis's injections, and its answers to the judge's calls on
	// the hooks connection (Call numbers them, Action or Why answers).
	Length     time.Duration `json:"length,omitempty"`
	Point      history.Point `json:"point,omitempty"`
	Injections *Injections   `json:"injections,omitempty"`
	Call       int64         `json:"call,omitempty"`
	Action     *Action       `json:"action,omitempty"`
}

type reply struct {
	Err string `json:"err,omitempty"`
	// Protocol says Err wraps ErrProtocol: the remote error wraps it too.
	Protocol bool `json:"protocol,omitempty"`
	// Refused says Err wraps ErrRefused.
	Refused bool       `json:"refused,omitempty"`
	Now     int64      `json:"now"`
	Stop    bool       `json:"stop,omitempty"`
	Info    *CaseInfo  `json:"info,omitempty"`
	Start   *StartInfo `json:"start,omitempty"`
	Grant   *Grant     `json:"grant,omitempty"`
	Result  *Result    `json:"result,omitempty"`
	RunID   string     `json:"run_id,omitempty"`
	// Replies to a remote peer: the live view, the clients in Acquire,
	// the start (judge's wall clock, ns; 0 when cancelled), a holder
	// extending. On the hooks connection the judge's calls: Call numbers
	// them, Event is a grant to decide on, PauseProcess and PauseLength a
	// pause to carry out.
	Live         *Live                 `json:"live,omitempty"`
	Acquiring    map[int]time.Duration `json:"acquiring,omitempty"`
	StartWall    int64                 `json:"start_wall,omitempty"`
	Held         *Held                 `json:"held,omitempty"`
	Call         int64                 `json:"call,omitempty"`
	Event        *SectionEvent         `json:"event,omitempty"`
	PauseProcess int                   `json:"pause_process,omitempty"`
	PauseLength  time.Duration         `json:"pause_length,omitempty"`
}

func (r *reply) fail(err error) {
	r.Err, r.Protocol, r.Refused = err.Error(), errors.Is(err, ErrProtocol), errors.Is(err, ErrRefused)
}

// error is the reply's error as the caller sees it: the judge's message,
// wrapping ErrProtocol when the judge's error did.
func (r *reply) error() error {
	switch {
	case r.Err == "":
		return nil
	case r.Protocol:
		return fmt.Errorf("%w: %s", ErrProtocol, strings.TrimPrefix(r.Err, ErrProtocol.Error()+": "))
	case r.Refused:
		return ErrRefused
	}
	return fmt.Errorf("judge: %s", r.Err)
}

// Listen serves the judge on addr ("127.0.0.1:0" for any free port) until
// Close; Addr then says where. It returns once the listener is open. An
// address beyond loopback (another host could reach it) needs the run's
// token (Options.Token).
func (j *Judge) Listen(addr string) error {
	if j.opts.Token == "" && !loopback(addr) {
		return configf("judge: listen on %s: beyond loopback every process that reaches it could report: give the run a token (Options.Token; "+
			"lockbench judge --token-file)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("judge: listen on %s: %w", addr, err)
	}
	j.mu.Lock()
	if j.ln != nil {
		j.mu.Unlock()
		ln.Close()
		return fmt.Errorf("judge: already listening on %s", j.ln.Addr())
	}
	j.ln = ln
	j.mu.Unlock()
	j.serving.Go(func() { j.serve(ln) })
	return nil
}

// loopback reports whether addr (host:port) names a loopback address
// only: "localhost", 127.0.0.0/8 or ::1. An empty host is every address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// admit checks the token of a connection's first request, and says in the
// judge's log whom it refused: the peer's address, and who it said it was.
func (j *Judge) admit(conn net.Conn, req *request) error {
	if j.opts.Token == "" || subtle.ConstantTimeCompare([]byte(req.Token), []byte(j.opts.Token)) == 1 {
		return nil
	}
	if j.opts.Log != nil {
		why := "a wrong run token"
		if req.Token == "" {
			why = "no run token"
		}
		who := ""
		if req.Host != "" {
			who = fmt.Sprintf(" (it said it is host %q, %s)", req.Host, req.Op)
		}
		fmt.Fprintf(j.opts.Log, "judge: refused %s%s: %s\n", conn.RemoteAddr(), who, why)
	}
	return ErrRefused
}

// Addr is where the judge listens ("" before Listen).
func (j *Judge) Addr() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ln == nil {
		return ""
	}
	return j.ln.Addr().String()
}

// Close stops the judge: it stops listening, ends every wait (a host
// waiting for the others in Open or for its clients in Finish, a client
// at the start barrier), drops every connection and waits for their
// goroutines. Clients that had not sent Done are dead; a case still
// waiting for its hosts or at its start barrier is cancelled. A check
// already under way runs to its end (Options.CheckTimeout bounds it).
// Close may be called more than once.
func (j *Judge) Close() error {
	j.shut(ErrClosed)
	j.mu.Lock()
	ln := j.ln
	conns := make([]net.Conn, 0, len(j.conns))
	for c := range j.conns {
		conns = append(conns, c)
	}
	j.mu.Unlock()
	var err error
	if ln != nil {
		if e := ln.Close(); e != nil && !errors.Is(e, net.ErrClosed) {
			err = e
		}
	}
	for _, c := range conns {
		c.Close()
	}
	j.serving.Wait()
	return err
}

func (j *Judge) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		j.mu.Lock()
		if j.conns == nil {
			j.conns = map[net.Conn]bool{}
		}
		j.conns[conn] = true
		j.mu.Unlock()
		j.serving.Go(func() {
			j.handle(conn)
			j.mu.Lock()
			delete(j.conns, conn)
			j.mu.Unlock()
		})
	}
}

// handle serves one connection until it closes or the judge does. A
// goroutine of its own reads the requests, so that a request that waits
// (open, ready, finish) ends as soon as the connection closes: a host or
// client that went away is not waited for. A client connection that
// closes before Done leaves its client dead.
func (j *Judge) handle(conn net.Conn) {
	ctx, cancel := context.WithCancelCause(j.closing)
	defer cancel(nil)
	reqs := make(chan request)
	var reading sync.WaitGroup
	defer reading.Wait()
	defer conn.Close() // before the wait: it ends the read
	reading.Go(func() {
		dec := json.NewDecoder(bufio.NewReader(conn))
		for {
			var req request
			if err := dec.Decode(&req); err != nil {
				cancel(errConnLost)
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	})
	w := bufio.NewWriter(conn)
	enc := json.NewEncoder(w)
	var client *Case // set by hello: the connection is that client's
	process := 0
	admitted := false
	defer func() {
		if client != nil {
			client.doneWith(process, nil, errConnLost.Error())
		}
	}()
	for {
		var req request
		select {
		case req = <-reqs:
		case <-ctx.Done():
			return
		}
		var rep reply
		if !admitted {
			if err := j.admit(conn, &req); err != nil {
				rep.fail(err)
				rep.Now = time.Now().UnixNano()
				_ = enc.Encode(&rep)
				_ = w.Flush()
				return
			}
			admitted = true
		}
		if req.Op == "hooks" && client == nil {
			j.serveHooks(ctx, &req, reqs, enc, w)
			return
		}
		if err := j.do(ctx, &req, &rep, &client, &process); err != nil {
			rep.fail(err)
		}
		if client != nil {
			if req.Op != "ready" || rep.Err == "" {
				client.replied(process)
			}
			rep.Stop = client.stoppingLocked()
			if req.Op == "done" {
				client = nil // done: its connection may now close
			}
		}
		rep.Now = time.Now().UnixNano()
		if err := enc.Encode(&rep); err != nil {
			return
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// stoppingLocked is stopping, taking the lock.
func (c *Case) stoppingLocked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping()
}

// do carries out one request.
func (j *Judge) do(ctx context.Context, req *request, rep *reply, client **Case, process *int) error {
	c := *client
	if c == nil {
		switch req.Op {
		case "open":
			if req.Spec == nil {
				return protocolf("open without a case spec")
			}
			info, err := j.Open(ctx, req.Host, *req.Spec)
			rep.Info = &info
			return err
		case "finish":
			r, err := j.Finish(ctx, req.Host, req.Case)
			rep.Result = r
			return err
		case "gone":
			j.Gone(req.Case, req.Process, req.Why)
			return nil
		case "stop":
			j.Stop(req.Case)
			return nil
		case "run":
			rep.RunID = j.RunID()
			return nil
		case "injected", "live", "acquiring", "enough", "started", "await-extending", "pause":
			return j.peerOp(ctx, req, rep)
		case "hello":
			c = j.Case(req.Case)
			if c == nil {
				return protocolf("case %q: not open", req.Case)
			}
			c.mu.Lock()
			err := c.hello(req.Host, req.Process, req.PID)
			c.mu.Unlock()
			if err == nil {
				*client, *process = c, req.Process
			}
			return err
		}
		return protocolf("request %q: unknown, or needs hello first", req.Op)
	}
	p := *process
	switch req.Op {
	case "ready":
		si, err := awaitStart(ctx, c, p)
		rep.Start = &si
		return err
	case "grant":
		if req.Grant == nil {
			return protocolf("grant without its report")
		}
		g, err := c.grant(p, *req.Grant)
		rep.Grant = &g
		return err
	case "read":
		return c.read(p, req.Section)
	case "write":
		return c.write(p, req.Section)
	case "end":
		return c.end(p, req.Section)
	case "report":
		if req.Report == nil {
			return protocolf("report without the op")
		}
		return c.report(p, *req.Report)
	case "extending":
		return c.extending(p, req.Section)
	case "done":
		m := Metrics{}
		if req.Metrics != nil {
			m = *req.Metrics
		}
		c.doneWith(p, &m, "")
		return nil
	}
	return protocolf("request %q: unknown for a client", req.Op)
}
