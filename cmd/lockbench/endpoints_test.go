package main

import (
	"slices"
	"testing"

	"github.com/spf13/pflag"

	"github.com/lockbench/lockbench/backends"
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

// TestEndpointFlagsComeFromTheDescriptors: every backend that declares
// endpoints gets its --<flag>-addrs, and each family of credentials its
// flags once; a flag that sets a param (--sentinel-master) reaches the
// backend's config, with the family's credentials.
func TestEndpointFlagsComeFromTheDescriptors(t *testing.T) {
	var e endpointFlags
	fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
	e.register(fl)
	for _, d := range backends.Descriptors() {
		ep := d.Endpoints
		if ep.Flag == "" {
			continue
		}
		if fl.Lookup(ep.Flag+"-addrs") == nil {
			t.Errorf("%s: no --%s-addrs", d.Name, ep.Flag)
		}
		if a := ep.Auth; a.Flag != "" && (fl.Lookup(a.Flag+"-username") == nil || fl.Lookup(a.Flag+"-password") == nil ||
			(a.TLS != "") != (fl.Lookup(a.Flag+"-tls-ca") != nil)) {
			t.Errorf("%s: the credential flags of family %s are not as declared", d.Name, a.Flag)
		}
		for _, p := range ep.Params {
			if fl.Lookup(p.Flag) == nil {
				t.Errorf("%s: no --%s for param %s", d.Name, p.Flag, p.Param)
			}
		}
	}
	if err := fl.Parse([]string{"--sentinel-addrs", "s:26379", "--sentinel-master", "mymaster", "--redis-username", "app", "--redis-password", "pw"}); err != nil {
		t.Fatal(err)
	}
	out, err := e.configs()
	if err != nil {
		t.Fatal(err)
	}
	if c := out["sentinel"]; c.Params["master"] != "mymaster" || c.Username != "app" || c.Password != "pw" || len(out) != 1 {
		t.Fatalf("configs = %+v: want the sentinel's, with its master and the Redis credentials", out)
	}
}
