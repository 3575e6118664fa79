package redlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// conn is one of Redlock's own connections to a node. A node's pipelined
// connection is shared by every goroutine of the Redlock: requests are
// pipelined on it and a reader goroutine hands each reply to the request
// it answers. Redlock dials it itself, with the client's options (dialer,
// TLS, credentials, database), because go-redis can neither send one
// command to five nodes before waiting for any reply, nor let a caller
// stop waiting once a majority has answered, nor batch the commands of
// concurrent callers into one write — the three things that make Redlock
// fast. Its state is guarded by its node's mutex.
type conn struct {
	nc  net.Conn
	rd  *bufio.Reader
	run string // the run_id of the server process, when the probe read it

	wbuf    []byte     // requests not yet written
	spare   []byte     // the buffer being written, recycled
	writing bool       // a sender is writing wbuf
	queue   []*pending // requests awaiting replies, in the order written
	since   time.Time  // the last progress: a reply, or the queue becoming non-empty
	broken  bool
}

// stalled reports whether the connection's server has answered nothing
// for stallAfter while requests wait: a paused or cut-off node, whose
// socket buffer may fill, so that writing to it could block the writer.
func (c *conn) stalled(now time.Time) bool {
	return len(c.queue) > 0 && now.Sub(c.since) > stallAfter
}

// pending is one request on a connection: the replies it expects, filled
// in by the connection's reader. A pending is used once.
type pending struct {
	want     int
	got      int
	rep      [maxReplies]reply
	err      error
	done     atomic.Bool // rep (or err) is complete
	deadline time.Time   // when the round stops waiting for it
	round    *round      // the round it belongs to, told of its completion
	queued   uint64      // its place in the order of the node's requests (node.queued)
}

// round is what the requests of one exchange share: a channel that wakes
// the round once left requests have completed.
type round struct {
	signal chan struct{} // capacity 1
	left   atomic.Int32
}

// done counts a completed request, and wakes the round when it was the
// last it waited for.
func (r *round) done() {
	if r.left.Add(-1) <= 0 {
		r.poke()
	}
}

func (r *round) poke() {
	select {
	case r.signal <- struct{}{}:
	default:
	}
}

// maxReplies bounds the commands of one request: the scripts reloaded in
// front of the longest request (the acquire script and WAIT), or the lean
// grant's commands with fencing and the restart quarantine.
const maxReplies = 12

// finish completes p and tells its round. Once done is set, p belongs to
// its owner again (which may recycle it): p is not touched after that.
func (p *pending) finish(err error) {
	r := p.round
	p.err = err
	p.done.Store(true)
	r.done()
}

// pendings recycles the pendings whose replies have been read.
var pendings = sync.Pool{New: func() any { return new(pending) }}

// newPending returns a clear pending of round r.
func newPending(r *round) *pending {
	p := pendings.Get().(*pending)
	p.want, p.got, p.err, p.round = 0, 0, nil, r
	p.done.Store(false)
	return p
}

// recycle gives back a pending that is done; one still in flight (a reply
// the round did not wait for) is left to the garbage collector.
func recycle(p *pending) {
	if p != nil && p.done.Load() {
		p.rep = [maxReplies]reply{}
		pendings.Put(p)
	}
}

// handshake is what a new connection sends before anyone uses it.
type handshake struct {
	scripts bool   // load the scripts
	probe   []byte // the quarantine probe to run, or nil
	info    bool   // read the server's run_id (INFO server), if the ACL lets it
}

// dial opens a connection to the node that opt describes: it
// authenticates, selects the database, names the connection
// (opt.ClientName), loads the scripts and runs the quarantine probe, all
// in one round trip, and returns the probe's answer (or, with hs.info and
// no probe, the server's run_id). It runs in the background, bounded by
// ctx (the client's DialTimeout), never on a lock round's clock. A
// refusal of the configuration (credentials, ACL, database, TLS) wraps
// ErrConfig.
func dial(ctx context.Context, opt *redis.Options, hs handshake) (*conn, string, error) {
	network := opt.Network
	if network == "" {
		network = "tcp"
	}
	nc, err := opt.Dialer(ctx, network, opt.Addr)
	if err != nil {
		return nil, "", asConfig(err)
	}
	user, pass, err := credentials(ctx, opt)
	if err != nil {
		nc.Close()
		return nil, "", err
	}
	var req []byte
	var what []string // what each reply answers, for errors
	if pass != "" {
		if user != "" {
			req = appendCommand(req, "AUTH", user, pass)
		} else {
			req = appendCommand(req, "AUTH", pass)
		}
		what = append(what, "AUTH")
	}
	if opt.DB != 0 {
		req = appendCommand(req, "SELECT", strconv.Itoa(opt.DB))
		what = append(what, "SELECT")
	}
	if opt.ClientName != "" {
		req = appendCommand(req, "CLIENT", "SETNAME", opt.ClientName)
		what = append(what, "CLIENT SETNAME")
	}
	if hs.scripts {
		for _, s := range allScripts {
			req = appendCommand(req, "SCRIPT", "LOAD", s.src)
			what = append(what, "SCRIPT LOAD")
		}
	}
	switch {
	case hs.probe != nil:
		req = append(req, hs.probe...)
		what = append(what, "the quarantine probe (INFO server, INFO memory, INFO stats)")
	case hs.info:
		req = appendCommand(req, "INFO", "server")
		what = append(what, "")
	}
	c := &conn{nc: nc, rd: bufio.NewReaderSize(nc, 16<<10)}
	last, err := c.handshake(ctx, req, what)
	if err != nil {
		nc.Close()
		return nil, "", fmt.Errorf("handshake: %w", err)
	}
	switch {
	case hs.probe != nil:
	case hs.info:
		last = infoField(last, "run_id")
	default:
		last = ""
	}
	return c, last, nil
}

// infoField returns a field of an INFO reply, "" if it has none.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v
		}
	}
	return ""
}

// handshake writes req and checks its replies, before anyone else uses
// the connection; it returns the last reply's text. A reply whose what is
// "" may be an error (a command the ACL may refuse, which Redlock can do
// without).
func (c *conn) handshake(ctx context.Context, req []byte, what []string) (string, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(adminTimeout)
	}
	if err := c.nc.SetDeadline(deadline); err != nil {
		return "", err
	}
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.nc.Write(req); err != nil {
		return "", err
	}
	var last reply
	for _, w := range what {
		r, err := readReply(c.rd)
		if err != nil {
			return "", err
		}
		if err := r.err(); err != nil && w != "" {
			return "", explain(w, err)
		}
		last = r
	}
	return last.s, c.nc.SetDeadline(time.Time{})
}

// explain adds to a node's refusal of command what Redlock needs from it,
// for the refusals an operator must act on (ACL permissions), and wraps
// the refusals of the configuration with ErrConfig.
func explain(command string, err error) error {
	var re redisError
	// NOPERM, or inside a script (Redis 7.0) "The user executing the
	// script can't run this command".
	if errors.As(err, &re) && (strings.Contains(string(re), "NOPERM") || strings.Contains(string(re), "can't run this command")) {
		return fmt.Errorf("%w: %s refused by the node's ACL: %w (Redlock's user needs %s, and the keys of the locks and those starting "+
			"with its key prefix, by default %q)", ErrConfig, command, err, aclCommands, DefaultKeyPrefix)
	}
	return asConfig(fmt.Errorf("%s: %w", command, err))
}

// call sends one request on a connection nobody else uses (a blocking
// one) and reads its reply.
func (c *conn) call(req []byte, deadline time.Time) (reply, error) {
	if err := c.nc.SetDeadline(deadline); err != nil {
		return reply{}, err
	}
	if _, err := c.nc.Write(req); err != nil {
		return reply{}, err
	}
	return readReply(c.rd)
}

// credentials returns the username and password the client would use.
func credentials(ctx context.Context, opt *redis.Options) (user, pass string, err error) {
	switch {
	case opt.CredentialsProviderContext != nil:
		return opt.CredentialsProviderContext(ctx)
	case opt.CredentialsProvider != nil:
		user, pass = opt.CredentialsProvider()
		return user, pass, nil
	default:
		return opt.Username, opt.Password, nil
	}
}
