package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/locker"
)

// session is what the Locker knows of its ZooKeeper session, and the
// leases that live and die with it.
type session struct {
	mu      sync.Mutex
	id      int64         // current session; 0 while there is none
	timeout time.Duration // the timeout the server enforces
	// acked is the send time of the latest request the leader validated
	// the session for: the leader cannot expire the session before acked
	// + timeout.
	acked  time.Time
	leases map[string]*lease // by znode path
	timer  *time.Timer       // fires at the deadline while leases exist
	closed bool
}

func newSession(timeout time.Duration) *session {
	return &session{timeout: timeout, leases: map[string]*lease{}}
}

// margin is taken off the session timeout when the Locker decides how long
// a silent session is certainly alive: an allowance for the server's clock
// running faster than ours and for our own timer firing late, 5% of the
// timeout plus 2 ms. It is small next to the time heartbeats leave
// (seven eighths of the timeout), so normal operation never hits it.
func margin(timeout time.Duration) time.Duration { return timeout/20 + 2*time.Millisecond }

// deadline is when the leader may have expired the session. Call with mu
// held.
func (s *session) deadline() time.Time {
	if s.acked.IsZero() {
		return time.Time{}
	}
	return s.acked.Add(s.timeout - margin(s.timeout))
}

// current returns the session id and timeout.
func (s *session) current() (int64, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.timeout
}

// ack records that the leader validated session id for a request sent at
// sent.
func (s *session) ack(id int64, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == s.id && id != 0 && sent.After(s.acked) {
		s.acked = sent
	}
}

// left returns how long the session is certainly alive on the server.
func (s *session) left() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Until(s.deadline())
}

// connected records a connect reply. A new id (or 0: the old session
// expired) ends every lease of the old session; it returns them, with the
// cause, for the caller to end outside the lock.
func (s *session) connected(id int64, timeout time.Duration, dialled time.Time) ([]*lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != 0 && timeout > 0 {
		s.timeout = timeout
	}
	if id == s.id {
		// Reconnected to the same session, which the leader revalidated
		// after the connect request was sent.
		if id != 0 && dialled.After(s.acked) {
			s.acked = dialled
		}
		return nil, nil
	}
	var cause error
	if s.id != 0 {
		if id == 0 {
			cause = fmt.Errorf("session %#x expired", s.id)
		} else {
			cause = fmt.Errorf("session %#x was replaced by %#x", s.id, id)
		}
	}
	s.id, s.acked = id, time.Time{}
	if id != 0 {
		s.acked = dialled // a new session, created by the leader
	}
	return s.takeLocked(), cause
}

// errStale reports a grant the session could not back: it is gone, or
// was not heard from recently enough.
var errStale = errors.New("session not confirmed by the leader recently enough")

// register adds a granted lease under the lock, creating its Handle with
// newHandle, unless the session changed since the lease's znode was
// created or may have expired.
func (s *session) register(ls *lease, newHandle func() *locker.Handle) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return locker.ErrClosed
	}
	if ls.session != s.id {
		return fmt.Errorf("%w: znode %s belongs to session %#x, now %#x", zk.ErrSessionExpired, ls.path, ls.session, s.id)
	}
	if !time.Now().Before(s.deadline()) {
		return errStale
	}
	ls.h = newHandle()
	s.leases[ls.path] = ls
	ls.arm = time.AfterFunc(watchDelay, ls.startWatch)
	s.armLocked()
	return nil
}

// remove forgets a lease that ended or is being released. It returns false
// if the lease was not registered (any more).
func (s *session) remove(ls *lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[ls.path] != ls {
		return false
	}
	delete(s.leases, ls.path)
	ls.arm.Stop()
	return true
}

// holds reports whether the Locker holds any lease.
func (s *session) holds() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.leases) > 0
}

// deleted takes the lease whose znode path was deleted, if any.
func (s *session) deleted(path string) *lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	ls := s.leases[path]
	if ls != nil {
		delete(s.leases, path)
		ls.arm.Stop()
	}
	return ls
}

// close takes every lease and refuses new ones.
func (s *session) close() []*lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	return s.takeLocked()
}

func (s *session) takeLocked() []*lease {
	if len(s.leases) == 0 {
		return nil
	}
	all := make([]*lease, 0, len(s.leases))
	for _, ls := range s.leases {
		ls.arm.Stop()
		all = append(all, ls)
	}
	clear(s.leases)
	return all
}

// armLocked makes sure the timer fires at the deadline.
func (s *session) armLocked() {
	d := time.Until(s.deadline())
	if s.timer == nil {
		s.timer = time.AfterFunc(d, s.check)
		return
	}
	s.timer.Reset(d)
}

// check runs at the deadline: if no request was validated since, the
// session may have expired on the server and every lease ends.
func (s *session) check() {
	s.mu.Lock()
	if s.closed || len(s.leases) == 0 {
		s.mu.Unlock()
		return
	}
	deadline := s.deadline()
	if left := time.Until(deadline); left > 0 {
		s.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	lost := s.takeLocked()
	cause := fmt.Errorf("session %#x not confirmed by the leader since %s: with a %v timeout it may have expired and the "+
		"key been granted again",
		s.id, s.acked.Format(time.StampMilli), s.timeout)
	s.mu.Unlock()
	for _, ls := range lost {
		ls.h.Lose(cause)
	}
}

// onConnect is the dialer's report of a connect reply.
func (l *Locker) onConnect(id int64, timeout time.Duration, dialled time.Time) {
	lost, cause := l.sess.connected(id, timeout, dialled)
	for _, ls := range lost {
		ls.gone.Store(true) // the server deleted it with the session
		ls.h.Lose(cause)
	}
}

// onEvent receives every event of the zk.Conn, on its receive goroutine:
// a NodeDeleted for a lease's own znode means the key is no longer ours.
func (l *Locker) onEvent(ev zk.Event) {
	if ev.Type != zk.EventNodeDeleted {
		return
	}
	if ls := l.sess.deleted(ev.Path); ls != nil {
		ls.gone.Store(true)
		ls.h.Lose(fmt.Errorf("znode %s was deleted", ev.Path))
	}
}

// heartbeat sends a request the leader validates the session for (a
// multi-op holding one version check of "/", which changes nothing) and
// records it.
func (l *Locker) heartbeat(ctx context.Context) error {
	id, _ := l.sess.current()
	sent := time.Now()
	err := l.call(ctx, func() error {
		_, err := l.conn.Multi(&zk.CheckVersionRequest{Path: "/", Version: -1})
		return err
	}, nil)
	// The leader checks the session before the node and its ACL.
	if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNoAuth) {
		l.sess.ack(id, sent)
		return nil
	}
	return err
}

// heartbeats keeps the session's deadline ahead while the Locker holds or
// waits for keys, sending a heartbeat when no validated request was sent
// for an eighth of the session timeout.
func (l *Locker) heartbeats() {
	for {
		_, timeout := l.sess.current()
		every := timeout / 8
		if !l.sleep(every) {
			return
		}
		if !l.sess.holds() && l.pending.Load() == 0 {
			continue
		}
		if l.sess.left() > timeout-margin(timeout)-every {
			continue // a recent write already confirmed the session
		}
		_ = l.heartbeat(context.Background())
	}
}
