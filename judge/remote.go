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
)

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
	// token goes with the first request, then is forgotten.
	token string
}

// A DialOption changes how a client or runner connects to a judge.
type DialOption func(*line)

// Token presents the run's token (Options.Token) to a judge that asks
// for one.
func Token(t string) DialOption { return func(l *line) { l.token = t } }

func dial(ctx context.Context, addr string, opts ...DialOption) (*line, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("judge at %s: %w", addr, err)
	}
	w := bufio.NewWriter(conn)
	l := &line{conn: conn, dec: json.NewDecoder(bufio.NewReader(conn)), w: w, enc: json.NewEncoder(w),
		thetaLo: noBound, thetaHi: math.MaxInt64}
	for _, o := range opts {
		o(l)
	}
	return l, nil
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
	if l.token != "" {
		req.Token, l.token = l.token, ""
	}
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
func Dial(ctx context.Context, addr, id, host string, process, pid int, opts ...DialOption) (Conn, error) {
	l, err := dial(ctx, addr, opts...)
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

func (r *remoteConn) Extending(ctx context.Context, section int64) error {
	_, err := r.l.call(ctx, &request{Op: "extending", Section: section})
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
	opts  []DialOption
	// closed is closed by Close: the one-shot calls (Gone, Stop) then
	// end at once instead of dialing a judge that may be out of reach.
	closed    chan struct{}
	closeOnce sync.Once
}

var _ Referee = (*Remote)(nil)

// DialRemote connects a runner to the judge at addr.
func DialRemote(ctx context.Context, addr string, opts ...DialOption) (*Remote, error) {
	l, err := dial(ctx, addr, opts...)
	if err != nil {
		return nil, err
	}
	rep, err := l.call(ctx, &request{Op: "run"})
	if err != nil {
		l.conn.Close()
		return nil, err
	}
	return &Remote{addr: addr, runID: rep.RunID, l: l, opts: opts, closed: make(chan struct{})}, nil
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
	select {
	case <-r.closed:
		return
	default:
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-r.closed:
			cancel()
		case <-done:
		}
	}()
	l, err := dial(ctx, r.addr, r.opts...)
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

// Close drops the connection and ends the one-shot calls under way: a
// runner that lost the judge's host closes it so as not to wait for it.
func (r *Remote) Close() error {
	r.closeOnce.Do(func() { close(r.closed) })
	return r.l.conn.Close()
}
