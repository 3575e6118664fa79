package inventory_test

import (
	"testing"

	"github.com/lockbench/lockbench/inventory"
)

// FuzzParse: an inventory is a file a user writes. Whatever it holds,
// Parse returns an inventory or an error naming the file, and never
// panics; an inventory it accepts has hosts, and parsing the same bytes
// again gives the same answer.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"hosts:\n  - address: 10.0.0.11\n    roles: {clients: true, judge: {}}\n",
		"defaults:\n  user: root\n  identity_file: ~/.ssh/lab_key\nhosts:\n  - name: redis-1\n    address: 10.0.0.11\n" +
			"    roles:\n      servers:\n        - backend: redlock\n          data: /var/lib/lockbench/redlock\n          port: 6379\n",
		"hosts:\n  - address: \"[fd00::21]:2222\"\n    agent: true\n    roles:\n      servers:\n" +
			"        - {backend: sentinel, data: /d, port: 6380, sentinel_port: 26380}\n",
		"hosts:\n  - address: 10.0.0.1\n    roles:\n      servers:\n        - {backend: etcd, data: /d, port: 2379, peer_port: 2380, proxy_port: 2480}\n",
		"hosts: []\n",
		"hosts:\n  - address: 10.0.0.1:99999\n",
		"hosts:\n  - {address: a, roles: {servers: [{backend: redlock, port: -1}]}}\n",
		"hosts: [&a {address: x}, *a]\n",
		"{",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := inventory.Parse(data, "/etc/lockbench/hosts.yaml")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if len(inv.Hosts) == 0 {
			t.Fatal("accepted an inventory without hosts")
		}
		again, err := inventory.Parse(data, "/etc/lockbench/hosts.yaml")
		if err != nil || len(again.Hosts) != len(inv.Hosts) {
			t.Fatalf("the same bytes parsed twice: %d hosts, then %v, %v", len(inv.Hosts), again, err)
		}
	})
}
