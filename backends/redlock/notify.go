package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// notifier wakes waiters when a key is released: the release script
// publishes on the key's channel, and every node's subscription delivers
// it here. A waiter then tries again at once instead of sleeping through
// a backoff. Subscriptions are made lazily, per key, only while somebody
// waits for that key, so an uncontended lock costs no pub/sub traffic.
type notifier struct {
	nodes  []*node
	ctx    context.Context // ends when the Redlock is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{} // channel -> waiters
	ps   []*redis.PubSub                       // per node, made on first use
}

func newNotifier(nodes []*node) *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{nodes: nodes, ctx: ctx, cancel: cancel, subs: map[string]map[chan struct{}]struct{}{}, ps: make([]*redis.PubSub, len(nodes))}
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
	w := n.subs[channel]
	if w == nil {
		w = map[chan struct{}]struct{}{}
		n.subs[channel] = w
		n.each(func(ps *redis.PubSub, ctx context.Context) { _ = ps.Subscribe(ctx, channel) })
	}
	w[wake] = struct{}{}
	return func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(w, wake)
		if len(w) == 0 && n.subs[channel] != nil {
			delete(n.subs, channel)
			if n.ctx.Err() == nil {
				n.each(func(ps *redis.PubSub, ctx context.Context) { _ = ps.Unsubscribe(ctx, channel) })
			}
		}
	}
}

// each calls f with every node's subscription, starting the ones not yet
// running. n.mu is held.
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
		for wake := range n.subs[msg.Channel] {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
		n.mu.Unlock()
	}
}

// close ends every subscription and waits for the receivers to return.
func (n *notifier) close() {
	n.mu.Lock()
	n.cancel()
	pss := n.ps
	n.mu.Unlock()
	for _, ps := range pss {
		if ps != nil {
			ps.Close()
		}
	}
	n.wg.Wait()
}
