package redlock

import (
	"strings"
	"time"
)

// The plain path: an uncontended grant without fencing sends each node
// SET key value NX PX ttl and a GET of its marker, pipelined, instead of
// the acquire script, which costs the node more (Lua). The marker is read
// after the SET, on the same connection, so a node that lost its data
// before or between the two is seen not to admit the connection's server
// process, exactly as the script would see it. A node whose marker does
// not record this client's max TTL yet gets the script, which records it.

// fastPath reports whether a first try may send plain commands (SET NX
// PX, and GET of the node marker) rather than the acquire script, which
// costs the nodes more: without fencing (its counter needs the script),
// and while this Redlock has not found a key held for a second (a
// contended key needs the script's queue; a refused plain SET would cost a
// second round).
func (r *Redlock) fastPath() bool {
	return !r.c.fencing && time.Now().UnixNano() > r.contendedUntil.Load()
}

// contended records that a try found a key held by others: the next
// second's tries use the script.
func (r *Redlock) contended() {
	r.contendedUntil.Store(time.Now().Add(time.Second).UnixNano())
}

// plainReply turns the replies to SET NX and GET of the marker into what
// the acquire script would have answered: 0 granted, -1 held, -2 not
// admitted. A node whose marker does not record this client's max TTL
// does not count either: the script must record it first.
func (a *attempt) plainReply(i int, c *call) reply {
	set := c.rep[0].kind == '+'
	if !a.r.c.quarantine {
		if set {
			return reply{kind: ':', n: 0}
		}
		return reply{kind: ':', n: -1}
	}
	m := c.rep[1]
	run, maxTTL, _ := strings.Cut(m.s, " ")
	switch {
	case m.err() != nil || m.kind != '$' || run != a.runs[i]:
		if set {
			a.set[i] = true // excluded, but it holds our value: release it
		}
		return reply{kind: ':', n: -2}
	case parseMS(maxTTL) < a.r.c.maxTTL:
		c.node.unrecord()
		if set {
			a.set[i] = true
		}
		return reply{kind: ':', n: -3}
	case set:
		return reply{kind: ':', n: 0}
	}
	return reply{kind: ':', n: -1}
}
