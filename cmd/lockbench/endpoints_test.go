package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"
)

// TestEndpointConfigs: the endpoint flags map to the backends that use
// them; rueidislock follows --redis-addrs unless given its own.
func TestEndpointConfigs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want map[string][]string // backend → addrs
		user map[string]string   // backend → username
	}{
		{[]string{"--redis-addrs", "r:6379"}, map[string][]string{"redis": {"r:6379"}, "rueidislock": {"r:6379"}}, nil},
		{[]string{"--redis-addrs", "r:6379", "--rueidislock-addrs", "q:6379"}, map[string][]string{"redis": {"r:6379"}, "rueidislock": {"q:6379"}}, nil},
		{[]string{"--postgres-addrs", "postgres://app@db/locks", "--postgres-username", "locks", "--postgres-password", "pw"},
			map[string][]string{"postgres": {"postgres://app@db/locks"}}, map[string]string{"postgres": "locks"}},
	} {
		var e endpointFlags
		fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
		e.register(fl)
		if err := fl.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		out, err := e.configs()
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != len(tc.want) {
			t.Errorf("%v: configs for %d backends, want %d: %v", tc.args, len(out), len(tc.want), out)
		}
		for name, addrs := range tc.want {
			if !slices.Equal(out[name].Addrs, addrs) {
				t.Errorf("%v: %s addrs %v, want %v", tc.args, name, out[name].Addrs, addrs)
			}
		}
		for name, user := range tc.user {
			if out[name].Username != user || out[name].Password != "pw" {
				t.Errorf("%v: %s credentials %q/%q", tc.args, name, out[name].Username, out[name].Password)
			}
		}
	}
}
