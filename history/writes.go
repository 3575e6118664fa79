package history

// write counts a write made in section s against s's key: a section
// protects its own key, whatever key a malformed history names.
func (c *counter) write(o Op, s *section) {
	k := c.key(s.key)
	c.r.Writes++
	if c.fenced && !s.hasToken {
		c.r.Unfenced++
	}
	stale := c.superseded(k, s)
	ok := o.Type == OK
	switch {
	case stale && s.told:
		c.r.StaleTold++
	case stale:
		c.r.StaleSilent++
	}
	switch {
	case ok && stale:
		c.r.StaleAccepted++
		c.r.StaleAcceptedAt = append(c.r.StaleAcceptedAt, o.Complete)
		if c.want(exStale) {
			c.example("stale write accepted: key %q section %d (process %d%s) wrote %d at %s after section #%d of the key was granted",
				s.key, s.id, s.process, tokenText(s.token, s.hasToken), o.Value, seconds(o.Complete), k.grants)
		}
	case !ok && stale:
		c.r.StaleRejected++
	case !ok:
		c.r.RejectedCurrent++
		if c.want(exRejected) {
			c.example("write of the newest holder rejected: key %q section %d%s", s.key, s.id, tokenText(s.token, s.hasToken))
		}
	}
	if ok {
		c.r.Accepted++
		k.accepted++
		k.counter = o.Value
	}
}

// superseded reports whether a later grant of the key than s's has
// reached the judge: one that arrived after s's and did not certainly
// return before it, or one that arrived earlier but certainly returned
// after it (s's grant was reported late).
func (c *counter) superseded(k *keyState, s *section) bool {
	if s.overtaken {
		return true
	}
	own := k.positions[s.seq-1]
	for _, r := range k.positions[s.seq:] {
		if r.hi >= own.lo {
			return true
		}
	}
	return false
}
