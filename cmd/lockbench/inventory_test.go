package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/remote/remotetest"
)

// TestHostsCheck runs lockbench hosts check on simulated hosts: it exits
// zero when each host can play its roles, and otherwise names each
// failing host and check; a bad inventory is refused with its line.
func TestHostsCheck(t *testing.T) {
	lab := remotetest.New(t, 2, remotetest.Hide(1, "/dev/fuse"))
	write := func(hosts string) string { return writeInventory(t, lab, hosts) }
	server := func(addr string) string {
		return fmt.Sprintf("  - address: %s\n    roles:\n      servers:\n        - {backend: redlock, binary: redis-server, data: /tmp/redlock, port: 6379}\n", addr)
	}
	h1, h2 := lab.Hosts[0].Addr.String(), lab.Hosts[1].Addr.String()

	stdout, stderr, err := lockbench(t, "hosts", "check", "--inventory", write(server(h1)+"  - {address: "+h2+", roles: {clients: true}}\n"))
	if err != nil {
		t.Fatalf("hosts check: %v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "all 2 hosts ready") || strings.Contains(stdout, "FAIL") {
		t.Errorf("stdout:\n%s", stdout)
	}

	stdout, _, err = lockbench(t, "hosts", "check", "--inventory", write(server(h1)+server(h2)))
	if err == nil || !strings.Contains(err.Error(), "1 of ") || !strings.Contains(err.Error(), "on 1 of 2 hosts") {
		t.Fatalf("a host without /dev/fuse: %v\n%s", err, stdout)
	}
	t.Log("\n" + stdout)
	var fails []string
	for line := range strings.Lines(stdout) {
		if strings.Contains(line, "FAIL") {
			fails = append(fails, strings.Join(strings.Fields(line)[:3], " "))
		}
	}
	if want := h2 + " fuse FAIL"; len(fails) != 1 || fails[0] != want {
		t.Errorf("failures %q, want %q:\n%s", fails, want, stdout)
	}

	_, _, err = lockbench(t, "hosts", "check", "--inventory", write("  - {address: "+h1+", roles: {servers: [{backend: memcached, binary: /b, data: /d, port: 1}]}}\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown backend "memcached"`) || !strings.Contains(err.Error(), "hosts.yaml:6") {
		t.Errorf("an unknown backend: %v", err)
	}
	if _, _, err := lockbench(t, "hosts", "check"); err == nil || !strings.Contains(err.Error(), "--inventory") {
		t.Errorf("no inventory: %v", err)
	}
}
