package redlock

import (
	"context"
	"sync"
)

// queue serialises, within one Redlock, the goroutines that want the same
// key: only the head of a key's queue talks to the servers, the others
// wait their turn in FIFO order and get it the moment the lease before
// them ends. Goroutines of one process therefore never split the vote
// among themselves, and their waits are fair.
type queue struct {
	mu   sync.Mutex
	keys map[string]*waiters
}

type waiters struct {
	next []chan struct{} // FIFO; a closed channel hands over the turn
}

// enter waits for key's turn. It returns an error wrapping ctx.Err() or
// closing's cause if either ends first.
func (q *queue) enter(ctx context.Context, key string, closing context.Context) error {
	q.mu.Lock()
	if q.keys == nil {
		q.keys = map[string]*waiters{}
	}
	w, busy := q.keys[key]
	if !busy {
		q.keys[key] = &waiters{}
		q.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	w.next = append(w.next, turn)
	q.mu.Unlock()

	var err error
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-closing.Done():
		err = context.Cause(closing)
	}
	q.mu.Lock()
	for i, c := range w.next {
		if c == turn {
			w.next = append(w.next[:i], w.next[i+1:]...)
			q.mu.Unlock()
			return err
		}
	}
	q.mu.Unlock()
	// The turn was handed to us as we gave up: pass it on.
	q.leave(key)
	return err
}

// tryEnter takes key's turn only if nobody in this process has it.
func (q *queue) tryEnter(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.keys == nil {
		q.keys = map[string]*waiters{}
	}
	if _, busy := q.keys[key]; busy {
		return false
	}
	q.keys[key] = &waiters{}
	return true
}

// busy reports whether a goroutine holds or awaits key's turn.
func (q *queue) busy(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.keys[key]
	return ok
}

// leave hands key's turn to the next waiter, or frees it.
func (q *queue) leave(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.keys[key]
	if w == nil {
		return
	}
	if len(w.next) == 0 {
		delete(q.keys, key)
		return
	}
	turn := w.next[0]
	w.next = w.next[1:]
	close(turn)
}
