package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier wakes waiters when a key is released: the release script
// publishes on the key's channel, and a subscription delivers it here, so
// a waiter tries again at once instead of sleeping through a backoff.
//
// It subscribes, per key and only while somebody waits for that key, on
// the first notifyNodes nodes in canonical order — the priority node that
// contended attempts try first, and one more in case it is down — rather
// than on every node: every release is published by each node, and five
// copies of each wake-up would cost more than they save. A key's
// subscription lingers a little after its last waiter leaves, so a hot
// key is not subscribed and unsubscribed at every grant. An uncontended
// lock costs no pub/sub traffic at all.
type notifier struct {
	nodes  []*node
	ctx    context.Context // ends when the Redlock is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	subs map[string]*subscription // by channel
	ps   []*redis.PubSub          // per node, made on first use
}

// subscription is one key's channel and its waiters.
type subscription struct {
	waiters map[chan struct{}]struct{}
	linger  *time.Timer // pending unsubscribe; nil while waited on
}

// notifyNodes is how many nodes a waiter listens to.
const notifyNodes = 2

// lingerFor is how long a key stays subscribed after its last waiter.
const lingerFor = time.Second

func newNotifier(nodes []*node) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{nodes: nodes[:min(notifyNodes, len(nodes))], ctx: ctx, cancel: cancel,
		subs: map[string]*subscription{}, ps: make([]*redis.PubSub, min(notifyNodes, len(nodes)))}
}

// subscribeTimeout bounds a SUBSCRIBE or UNSUBSCRIBE to one node.
const subscribeTimeout = 100 * time.Millisecond

// watch delivers a value on wake (without blocking: give it a buffer of
// one) each time key is released, until stop is called.
func (n *notifier) watch(key string, wake chan struct{}) (stop func()) {
	channel := releaseChannel(key)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return func() {}
	}
	s := n.subs[channel]
	switch {
	case s == nil:
		s = &subscription{waiters: map[chan struct{}]struct{}{}}
		n.subs[channel] = s
		n.each(func(ps *redis.PubSub, ctx context.Context) { _ = ps.Subscribe(ctx, channel) })
	case s.linger != nil:
		s.linger.Stop()
		s.linger = nil
	}
	s.waiters[wake] = struct{}{}
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(s.waiters, wake)
		if len(s.waiters) > 0 || s.linger != nil || n.subs[channel] != s {
			return
		}
		s.linger = time.AfterFunc(lingerFor, func() { n.unsubscribe(channel, s) })
	}
}

// unsubscribe drops a key's subscription if nobody came back to it.
func (n *notifier) unsubscribe(channel string, s *subscription) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.subs[channel] != s || len(s.waiters) > 0 || n.ctx.Err() != nil {
		return
	}
	delete(n.subs, channel)
	n.each(func(ps *redis.PubSub, ctx context.Context) { _ = ps.Unsubscribe(ctx, channel) })
}

// each calls f with every listened node's subscription, starting the ones
// not yet running. n.mu is held.
func (n *notifier) each(f func(*redis.PubSub, context.Context)) {
	ctx, cancel := context.WithTimeout(n.ctx, subscribeTimeout)
	defer cancel()
	for i, nd := range n.nodes {
		if n.ps[i] == nil {
			n.ps[i] = nd.client.Subscribe(n.ctx)
			n.wg.Add(1)
			go n.receive(n.ps[i])
		}
		f(n.ps[i], ctx)
	}
}

// receive delivers one node's release messages until the notifier closes.
func (n *notifier) receive(ps *redis.PubSub) {
	defer n.wg.Done()
	for {
		msg, err := ps.ReceiveMessage(n.ctx)
		if err != nil {
			// The subscription reconnects on the next receive; don't spin
			// while the node is down.
			select {
			case <-n.ctx.Done():
				return
			case <-time.After(downFor):
				continue
			}
		}
		n.mu.Lock()
		if s := n.subs[msg.Channel]; s != nil {
			for wake := range s.waiters {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
		n.mu.Unlock()
	}
}

// close ends every subscription and waits for the receivers to return.
func (n *notifier) close() {
	n.mu.Lock()
	n.cancel()
	for _, s := range n.subs {
		if s.linger != nil {
			s.linger.Stop()
		}
	}
	pss := n.ps
	n.mu.Unlock()
	for _, ps := range pss {
		if ps != nil {
			ps.Close()
		}
	}
	n.wg.Wait()
}
