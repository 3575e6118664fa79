package main

import (
	"strings"
	"testing"
)

// TestEnvelopeRefusesBadInput: each bad flag of lockbench envelope is
// refused before a server starts, with the bad value named.
func TestEnvelopeRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "redis"}, `"out"`},
		{[]string{"--out", dir}, "--backend"},
		{[]string{"--out", dir, "--backend", "redsi"}, "redsi"},
		{[]string{"--out", dir, "--backend", "redis", "--fault", "clock-skew"}, `"clock-skew"`},
		{[]string{"--out", dir, "--backend", "redis", "--guard", "fencing"}, "fencing"},
		{[]string{"--out", dir, "--backend", "redis", "--budget", "0s"}, "--budget 0s"},
		{[]string{"--out", dir, "--backend", "redis", "--injections", "4", "--safe-injections", "2"}, "--injections 4"},
	} {
		_, _, err := lockbench(t, append([]string{"envelope"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("envelope %v = %v: want an error naming %s", tc.args, err, tc.want)
		}
	}
}

// TestAdviseEnvelopesRefusesAFileWithout: --envelopes names a dir whose
// results.json holds no envelopes: refused, saying what writes them.
func TestAdviseEnvelopesRefusesAFileWithout(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, err := lockbench(t, "run", "--backend", "noop", "--fault", "none", "--duration", "200ms", "--out", dir, "--no-report"); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	_, _, err := lockbench(t, "advise", "--dry-run", "--envelopes", dir)
	if err == nil || !strings.Contains(err.Error(), "lockbench envelope writes them") {
		t.Fatalf("advise --envelopes on a run without envelopes = %v", err)
	}
}
