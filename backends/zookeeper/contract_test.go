package zookeeper

import (
	"testing"
	"time"
)

// TestDeclaredContract: the contract a case declares is the session it
// asks for less the client's margin, what Info reports once a server
// grants that session: at a TTL of 2 s a grant is promised 1.898 s, not
// the TTL its lease's ValidUntil counts.
func TestDeclaredContract(t *testing.T) {
	for _, tc := range []struct {
		ttl, promise time.Duration
	}{{time.Second, time.Second}, {2 * time.Second, 1898 * time.Millisecond}, {5 * time.Second, 4748 * time.Millisecond}} {
		info, err := contract(tc.ttl, map[string]string{"session": max(tc.ttl, MinCaseSession).String()})
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Promise(tc.ttl); got != tc.promise {
			t.Errorf("TTL %v: promise %v, want %v", tc.ttl, got, tc.promise)
		}
	}
	if _, err := contract(time.Second, map[string]string{"session": "soon"}); err == nil {
		t.Error(`session "soon": no error`)
	}
}
