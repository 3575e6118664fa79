package judge

// Guard is how the resource protects itself from a holder whose lease has
// ended: the remedies of the Redlock debate, measured side by side. Each
// models what a real store can do: it learns a token only from a request
// that carries one.
type Guard string

// The guard modes.
const (
	// GuardNone accepts every write: the resource trusts the lock.
	GuardNone Guard = "none"
	// GuardFence is Kleppmann's fencing token as a store implements it:
	// every write carries the holder's token, and the store rejects a
	// write whose token is below the highest token written to the key
	// (UPDATE … SET token = $t WHERE token <= $t). Reads carry no token,
	// so a superseded holder whose successor has not written yet still
	// gets its write in. A lease without a token cannot be fenced: its
	// writes are accepted.
	GuardFence Guard = "fence"
	// GuardFenceRW is fencing where reads carry the token too: the store
	// learns a new holder's token as soon as it reads, so the superseded
	// holder is rejected even before its successor writes.
	GuardFenceRW Guard = "fence-rw"
	// GuardCAS is antirez's alternative: a section's first access (its
	// read) marks the key with the section's unique id, and its write is
	// accepted only while the mark is still its own. It needs no counter
	// from the lock, but it does not order writers: a holder that pauses
	// before its first access can still mark over a newer holder and
	// write.
	GuardCAS Guard = "cas"
)

// Guards lists the guard modes.
var Guards = []Guard{GuardNone, GuardFence, GuardFenceRW, GuardCAS}

// ParseGuard checks a guard mode name; the error names the bad value.
func ParseGuard(s string) (Guard, error) {
	for _, g := range Guards {
		if string(g) == s {
			return g, nil
		}
	}
	return "", configf("guard %q: want %q, %q, %q or %q", s, GuardNone, GuardFence, GuardFenceRW, GuardCAS)
}

// Fenced reports whether the guard checks fencing tokens.
func (g Guard) Fenced() bool { return g == GuardFence || g == GuardFenceRW }

// store is the fenced resource: one read-modify-write counter per key,
// the highest token the store has learned and the CAS mark. It only
// decides what a store would accept; the checkers judge the history of
// what it did. The caller serialises calls.
type store struct {
	guard Guard
	keys  map[string]*cell
}

type cell struct {
	counter  int64
	maxToken uint64
	haveMax  bool
	mark     int64 // section id of the last first access (cas)
}

func newStore(g Guard) *store { return &store{guard: g, keys: map[string]*cell{}} }

func (s *store) cell(key string) *cell {
	c := s.keys[key]
	if c == nil {
		c = &cell{}
		s.keys[key] = c
	}
	return c
}

// read is a section's first access: it returns the counter, and lets the
// store learn the token (fence-rw) or mark the key (cas).
func (s *store) read(key string, section int64, tok uint64, hasTok bool) int64 {
	c := s.cell(key)
	switch s.guard {
	case GuardFenceRW:
		c.learn(tok, hasTok)
	case GuardCAS:
		c.mark = section
	}
	return c.counter
}

// write stores value if the guard accepts the request, and reports
// whether it did.
func (s *store) write(key string, section int64, tok uint64, hasTok bool, value int64) bool {
	c := s.cell(key)
	ok := true
	switch s.guard {
	case GuardFence, GuardFenceRW:
		ok = !hasTok || !c.haveMax || tok >= c.maxToken
		if ok {
			c.learn(tok, hasTok)
		}
	case GuardCAS:
		ok = c.mark == section
	}
	if ok {
		c.counter = value
	}
	return ok
}

func (c *cell) learn(tok uint64, hasTok bool) {
	if hasTok && (!c.haveMax || tok > c.maxToken) {
		c.maxToken, c.haveMax = tok, true
	}
}
