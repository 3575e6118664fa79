package judge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// The wire protocol: JSON lines over TCP, one request and one reply at a
// time per connection. A client process has its own connection, which
// starts with hello; a runner's connection carries open, finish, gone and
// stop. Every reply carries the judge's wall clock, from which a client
// bounds the offset between its clock and the judge's.

type request struct {
	Op      string       `json:"op"`
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
}

type reply struct {
	Err     string     `json:"err,omitempty"`
	Invalid bool       `json:"invalid,omitempty"` // Err is a locker.ErrInvalid
	Now     int64      `json:"now"`
	Stop    bool       `json:"stop,omitempty"`
	Info    *CaseInfo  `json:"info,omitempty"`
	Start   *StartInfo `json:"start,omitempty"`
	Grant   *Grant     `json:"grant,omitempty"`
	Result  *Result    `json:"result,omitempty"`
	RunID   string     `json:"run_id,omitempty"`
}

func (r *reply) fail(err error) {
	r.Err, r.Invalid = err.Error(), errors.Is(err, locker.ErrInvalid)
}

func (r *reply) error() error {
	if r.Err == "" {
		return nil
	}
	if r.Invalid {
		return locker.Invalidf("judge: %s", r.Err)
	}
	return fmt.Errorf("judge: %s", r.Err)
}

// Listen serves the judge on addr ("127.0.0.1:0" for any free port) until
// Close; Addr then says where. It returns once the listener is open.
func (j *Judge) Listen(addr string) error {
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

// Addr is where the judge listens ("" before Listen).
func (j *Judge) Addr() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ln == nil {
		return ""
	}
	return j.ln.Addr().String()
}

// Close stops listening and drops every connection; it waits for their
// goroutines. Clients that had not sent Done are dead.
func (j *Judge) Close() error {
	j.mu.Lock()
	ln := j.ln
	conns := make([]net.Conn, 0, len(j.conns))
	for c := range j.conns {
		conns = append(conns, c)
	}
	j.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
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

// handle serves one connection until it closes. A client connection that
// closes before Done leaves its client dead.
func (j *Judge) handle(conn net.Conn) {
	defer conn.Close()
	dec := json.NewDecoder(bufio.NewReader(conn))
	w := bufio.NewWriter(conn)
	enc := json.NewEncoder(w)
	var client *Case // set by hello: the connection is that client's
	process := 0
	defer func() {
		if client != nil {
			client.doneWith(process, nil, "its connection to the judge was lost")
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			return
		}
		var rep reply
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
				return locker.Invalidf("open without a case spec")
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
		case "hello":
			c = j.Case(req.Case)
			if c == nil {
				return locker.Invalidf("case %q: not open", req.Case)
			}
			c.mu.Lock()
			err := c.hello(req.Host, req.Process, req.PID)
			c.mu.Unlock()
			if err == nil {
				*client, *process = c, req.Process
			}
			return err
		}
		return locker.Invalidf("request %q: unknown, or needs hello first", req.Op)
	}
	p := *process
	switch req.Op {
	case "ready":
		si, err := awaitStart(ctx, c, p)
		rep.Start = &si
		return err
	case "grant":
		if req.Grant == nil {
			return locker.Invalidf("grant without its report")
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
			return locker.Invalidf("report without the op")
		}
		return c.report(p, *req.Report)
	case "done":
		m := Metrics{}
		if req.Metrics != nil {
			m = *req.Metrics
		}
		c.doneWith(p, &m, "")
		return nil
	}
	return locker.Invalidf("request %q: unknown for a client", req.Op)
}

// line is one connection to a judge: a request, then its reply.
type line struct {
	mu   sync.Mutex
	conn net.Conn
	dec  *json.Decoder
	w    *bufio.Writer
	enc  *json.Encoder
	// thetaLo and thetaHi bound the judge's clock minus ours (ns): the
	// judge's clock read Now somewhere between our send and our receipt.
	thetaLo, thetaHi int64
	stop             bool
}

func dial(ctx context.Context, addr string) (*line, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("judge at %s: %w", addr, err)
	}
	w := bufio.NewWriter(conn)
	return &line{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn)), w: w, enc: json.NewEncoder(w),
		thetaLo: noBound, thetaHi: math.MaxInt64}, nil
}

// call sends req and waits for the reply; ctx bounds the wait (the
// connection is closed when ctx ends first: a reply can no longer be
// matched to its request).
func (l *line) call(ctx context.Context, req *request) (*reply, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { l.conn.Close() })
	defer stop()
	sent := time.Now().UnixNano()
	if err := l.enc.Encode(req); err != nil {
		return nil, l.broken(ctx, err)
	}
	if err := l.w.Flush(); err != nil {
		return nil, l.broken(ctx, err)
	}
	var rep reply
	if err := l.dec.Decode(&rep); err != nil {
		return nil, l.broken(ctx, err)
	}
	recv := time.Now().UnixNano()
	l.thetaLo = max(l.thetaLo, rep.Now-recv)
	l.thetaHi = min(l.thetaHi, rep.Now-sent)
	l.stop = l.stop || rep.Stop
	return &rep, rep.error()
}

func (l *line) broken(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("judge: %w", ctx.Err())
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("judge closed the connection: %w", err)
	}
	return fmt.Errorf("judge: %w", err)
}

func (l *line) theta() (lo, hi int64) {
	if l.thetaHi == math.MaxInt64 {
		return noBound, noBound
	}
	return l.thetaLo, l.thetaHi
}

// Dial connects a client process to case id on the judge at addr, as
// process of host (pid is its OS process id, for the record).
func Dial(ctx context.Context, addr, id, host string, process, pid int) (Conn, error) {
	l, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if _, err := l.call(ctx, &request{Op: "hello", Case: id, Host: host, Process: process, PID: pid}); err != nil {
		l.conn.Close()
		return nil, err
	}
	return &remoteConn{l: l}, nil
}

// remoteConn is a client process's Conn.
type remoteConn struct{ l *line }

func (r *remoteConn) Ready(ctx context.Context) (StartInfo, error) {
	rep, err := r.l.call(ctx, &request{Op: "ready"})
	if err != nil {
		return StartInfo{}, err
	}
	return *rep.Start, nil
}

func (r *remoteConn) Grant(ctx context.Context, g GrantReport) (Grant, error) {
	g.ThetaLo, g.ThetaHi = r.theta()
	rep, err := r.l.call(ctx, &request{Op: "grant", Grant: &g})
	if err != nil {
		return Grant{}, err
	}
	return *rep.Grant, nil
}

func (r *remoteConn) theta() (int64, int64) {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	return r.l.theta()
}

func (r *remoteConn) Read(ctx context.Context, section int64) error {
	_, err := r.l.call(ctx, &request{Op: "read", Section: section})
	return err
}

func (r *remoteConn) Write(ctx context.Context, section int64) error {
	_, err := r.l.call(ctx, &request{Op: "write", Section: section})
	return err
}

func (r *remoteConn) End(ctx context.Context, section int64) error {
	_, err := r.l.call(ctx, &request{Op: "end", Section: section})
	return err
}

func (r *remoteConn) Report(ctx context.Context, op OpReport) error {
	op.ThetaLo, op.ThetaHi = r.theta()
	_, err := r.l.call(ctx, &request{Op: "report", Report: &op})
	return err
}

func (r *remoteConn) Done(ctx context.Context, m Metrics) error {
	_, err := r.l.call(ctx, &request{Op: "done", Metrics: &m})
	return err
}

func (r *remoteConn) Stopping() bool {
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	return r.l.stop
}

func (r *remoteConn) Close() error { return r.l.conn.Close() }

// Remote is a judge in another process, as a runner sees it.
type Remote struct {
	addr  string
	runID string
	l     *line
}

var _ Referee = (*Remote)(nil)

// DialRemote connects a runner to the judge at addr.
func DialRemote(ctx context.Context, addr string) (*Remote, error) {
	l, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	rep, err := l.call(ctx, &request{Op: "run"})
	if err != nil {
		l.conn.Close()
		return nil, err
	}
	return &Remote{addr: addr, runID: rep.RunID, l: l}, nil
}

// Open implements Referee.
func (r *Remote) Open(ctx context.Context, host string, spec CaseSpec) (CaseInfo, error) {
	rep, err := r.l.call(ctx, &request{Op: "open", Host: host, Spec: &spec})
	if err != nil {
		return CaseInfo{}, err
	}
	return *rep.Info, nil
}

// Finish implements Referee.
func (r *Remote) Finish(ctx context.Context, host, id string) (*Result, error) {
	rep, err := r.l.call(ctx, &request{Op: "finish", Host: host, Case: id})
	if err != nil {
		return nil, err
	}
	return rep.Result, nil
}

// Gone implements Referee. It uses a connection of its own, since the
// runner's may be waiting in Finish.
func (r *Remote) Gone(id string, process int, why string) {
	r.oneShot(&request{Op: "gone", Case: id, Process: process, Why: why})
}

// Stop implements Referee, on a connection of its own.
func (r *Remote) Stop(id string) { r.oneShot(&request{Op: "stop", Case: id}) }

// oneShot sends req on a new connection, best effort: the judge may be
// gone, and then so is the case.
func (r *Remote) oneShot(req *request) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := dial(ctx, r.addr)
	if err != nil {
		return
	}
	defer l.conn.Close()
	_, _ = l.call(ctx, req)
}

// Addr implements Referee.
func (r *Remote) Addr() string { return r.addr }

// RunID implements Referee.
func (r *Remote) RunID() string { return r.runID }

// Close drops the connection.
func (r *Remote) Close() error { return r.l.conn.Close() }
