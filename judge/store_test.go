package judge

import "testing"

func TestStoreGuards(t *testing.T) {
	// Holder a (token 5) reads and stalls; b (token 6) is granted and
	// reads; then a writes, then b writes.
	for _, tc := range []struct {
		guard          Guard
		bWritesFirst   bool
		wantA, wantB   bool
		wantFinalValue int64
	}{
		{guard: GuardNone, wantA: true, wantB: true, wantFinalValue: 1},
		// fence learns 6 only from b's write: a's write before it lands.
		{guard: GuardFence, wantA: true, wantB: true, wantFinalValue: 1},
		{guard: GuardFence, bWritesFirst: true, wantA: false, wantB: true, wantFinalValue: 1},
		// fence-rw learns 6 from b's read: a is rejected either way.
		{guard: GuardFenceRW, wantA: false, wantB: true, wantFinalValue: 1},
		// cas: b's read marked the key, so a's write is refused.
		{guard: GuardCAS, wantA: false, wantB: true, wantFinalValue: 1},
	} {
		s := newStore(tc.guard)
		va := s.read("k", 1, 5, true)
		vb := s.read("k", 2, 6, true)
		var gotA, gotB bool
		if tc.bWritesFirst {
			gotB = s.write("k", 2, 6, true, vb+1)
			gotA = s.write("k", 1, 5, true, va+1)
		} else {
			gotA = s.write("k", 1, 5, true, va+1)
			gotB = s.write("k", 2, 6, true, vb+1)
		}
		if gotA != tc.wantA || gotB != tc.wantB || s.keys["k"].counter != tc.wantFinalValue {
			t.Errorf("guard %s (b first %v): a accepted %v, b %v, counter %d; want %v, %v, %d",
				tc.guard, tc.bWritesFirst, gotA, gotB, s.keys["k"].counter, tc.wantA, tc.wantB, tc.wantFinalValue)
		}
	}
}

func TestCASDoesNotOrderAHolderThatPausedBeforeItsFirstAccess(t *testing.T) {
	s := newStore(GuardCAS)
	vb := s.read("k", 2, 0, false) // the newer holder marks first
	va := s.read("k", 1, 0, false) // the older one wakes and marks over it
	if !s.write("k", 1, 0, false, va+1) {
		t.Fatal("cas refused the holder whose mark is on the key")
	}
	if s.write("k", 2, 0, false, vb+1) {
		t.Fatal("cas accepted a holder whose mark was overwritten")
	}
}

func TestFenceAcceptsWritesWithoutTokens(t *testing.T) {
	s := newStore(GuardFence)
	s.read("k", 1, 0, false)
	if !s.write("k", 1, 0, false, 1) {
		t.Fatal("a write without a token must be accepted (it cannot be fenced)")
	}
}

func TestParseGuard(t *testing.T) {
	for _, g := range Guards {
		if got, err := ParseGuard(string(g)); err != nil || got != g {
			t.Errorf("ParseGuard(%q) = %q, %v", g, got, err)
		}
	}
	if _, err := ParseGuard("fencing"); err == nil {
		t.Error("ParseGuard accepted an unknown guard")
	}
}
