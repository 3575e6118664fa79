package redlock

import (
	"bufio"
	"strconv"
	"strings"
	"time"
)

// Restart quarantine, antirez's "delayed restart" enforced by the client.
//
// A node that restarts without its data forgets the locks it granted; if
// it voted at once, a second client could assemble a majority for a key
// that is still held. So a node votes only while the client has admitted
// it: its marker key (markerKey) holds the run_id of the server process
// that is running now. The acquire script refuses (-2) on a node that has
// no marker, which catches a restart without data on the very next round;
// an INFO every infoEvery catches a restart with data (run_id changed). A
// node that is not admitted stays out of the quorum until it has been up
// for one MaxTTL — by then every lock it may have forgotten has expired —
// and is then admitted by whichever client sees it first.

// infoEvery is how often a client re-reads a node's run_id and uptime,
// piggybacked on an acquire round (no extra round trip).
const infoEvery = time.Second

// health is a client's view of one node's restarts.
type health struct {
	runID     string
	startedAt time.Time // the latest the process can have started
	checkedAt time.Time // zero: check on the next round
	admitted  bool
	until     time.Time // not admitted before (startedAt + MaxTTL)
}

// needInfo reports whether the next round to the node should carry
// INFO server and GET markerKey.
func (n *node) needInfo(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.health.checkedAt.IsZero() || now.Sub(n.health.checkedAt) >= infoEvery
}

// votes reports whether the node's grants count toward the quorum.
func (n *node) votes() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.health.admitted
}

// suspect forgets the admission after the acquire script found no marker.
func (n *node) suspect() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.health.admitted = false
	n.health.checkedAt = time.Time{}
}

// quarantinedUntil returns when a node that is not admitted may be.
func (n *node) quarantinedUntil() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.health.until
}

// observe updates the node's health from the replies to INFO server and
// GET markerKey read at now. It returns the run_id to write as the marker
// when the node may be admitted: it has been up for maxTTL, or bootstrap
// says it is fresh (and has no marker at all).
func (n *node) observe(info, marker reply, now time.Time, maxTTL time.Duration, bootstrap bool) (admit string, err error) {
	if err := info.err(); err != nil {
		return "", err
	}
	if err := marker.err(); err != nil {
		return "", err
	}
	runID, uptime, err := parseInfo(info.s)
	if err != nil {
		return "", err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	h := &n.health
	h.runID, h.checkedAt = runID, now
	// uptime_in_seconds is the difference of two clock readings cut to
	// whole seconds, so it can exceed the real uptime by up to a second:
	// the latest possible start is a second later than it says.
	h.startedAt = now.Add(-uptime + time.Second)
	if marker.kind == '$' && marker.s == runID {
		h.admitted, h.until = true, time.Time{}
		return "", nil
	}
	h.admitted = false
	h.until = h.startedAt.Add(maxTTL)
	if !now.Before(h.until) || (bootstrap && marker.kind == 0) {
		return runID, nil
	}
	return "", nil
}

// admit records that the marker now holds runID.
func (n *node) admit(runID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.health.runID == runID {
		n.health.admitted, n.health.until = true, time.Time{}
	}
}

// parseInfo reads run_id and uptime_in_seconds from INFO server.
func parseInfo(info string) (runID string, uptime time.Duration, err error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	seenUptime := false
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch k {
		case "run_id":
			runID = v
		case "uptime_in_seconds":
			s, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return "", 0, errProtocolf("INFO uptime_in_seconds %q", v)
			}
			uptime, seenUptime = time.Duration(s)*time.Second, true
		}
	}
	if runID == "" || !seenUptime {
		return "", 0, errProtocolf("INFO server without run_id and uptime_in_seconds")
	}
	return runID, uptime, nil
}
