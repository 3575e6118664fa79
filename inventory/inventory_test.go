package inventory_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lockbench/lockbench/inventory"
)

const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGxuo8GBxLvZC1ZsBqvqhCq9bZgZ8R9VfvxxyO8WZ4Ai"

func TestParse(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	const doc = `
defaults:
  user: root
  identity_file: ~/.ssh/lab_key
  known_hosts: keys/known_hosts
hosts:
  - name: redis-1
    address: 10.0.0.11
    roles:
      servers:
        - backend: redlock
          binary: /usr/bin/redis-server
          data: /var/lib/lockbench/redlock
          port: 6379
        - backend: etcd
          binary: /opt/etcd/etcd
          data: /var/lib/lockbench/etcd
          port: 2379
          peer_port: 2380
          proxy_port: 2480
        - {backend: sentinel, data: /var/lib/lockbench/sentinel, port: 6380, sentinel_port: 26380}
  - address: "[fd00::21]:2222"
    user: admin
    agent: true
    identity_file: ""
    host_key: ` + hostKey + `
    clock_preload: /opt/lockbench/clock.so
    work_dir: /srv/lockbench
    roles: {clients: true, judge: {}}
`
	inv, err := inventory.Parse([]byte(doc), "/etc/lockbench/hosts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []inventory.Host{{
		Name: "redis-1", Address: "10.0.0.11:22", User: "root",
		IdentityFiles: []string{filepath.Join(home, ".ssh/lab_key")}, KnownHosts: []string{"/etc/lockbench/keys/known_hosts"},
		WorkDir: inventory.DefaultWorkDir,
		Servers: []inventory.Server{
			{Backend: "redlock", Binary: "/usr/bin/redis-server", Data: "/var/lib/lockbench/redlock", Port: 6379, ProxyPort: 6379 + inventory.DefaultProxyOffset, Line: 11},
			{Backend: "etcd", Binary: "/opt/etcd/etcd", Data: "/var/lib/lockbench/etcd", Port: 2379, PeerPort: 2380, ProxyPort: 2480, Line: 15},
			{Backend: "sentinel", Data: "/var/lib/lockbench/sentinel", Port: 6380, ProxyPort: 6380 + inventory.DefaultProxyOffset, SentinelPort: 26380, Line: 21},
		},
		Line: 7,
	}, {
		Name: "fd00::21", Address: "[fd00::21]:2222", User: "admin", Agent: true,
		HostKey: hostKey, KnownHosts: []string{"/etc/lockbench/keys/known_hosts"}, ClockPreload: "/opt/lockbench/clock.so",
		WorkDir: "/srv/lockbench", Clients: true, Judge: &inventory.Judge{Port: inventory.DefaultJudgePort},
		Line: 22,
	}}
	if !reflect.DeepEqual(inv.Hosts, want) {
		t.Errorf("hosts\n%+v\nwant\n%+v", inv.Hosts, want)
	}
	cfg := inv.Hosts[1].SSHConfig()
	if cfg.Addr != "[fd00::21]:2222" || len(cfg.HostKeys) != 1 || !cfg.Agent || cfg.User != "admin" {
		t.Errorf("SSH config %+v", cfg)
	}
	if r := inv.Hosts[0].Roles(); r != "redlock server on :6379, etcd server on :2379, sentinel server on :6380" {
		t.Errorf("roles %q", r)
	}
	if err := inv.CheckBackends([]string{"redlock", "redis"}); err == nil || !strings.Contains(err.Error(), `"etcd"`) || !strings.Contains(err.Error(), "hosts.yaml:15") {
		t.Errorf("unknown backend etcd: %v", err)
	}
	if err := inv.CheckBackends([]string{"redlock", "etcd", "sentinel"}); err != nil {
		t.Error(err)
	}
}

// TestParseErrors: every bad value is named, with its line, and one parse
// names every error of the file.
func TestParseErrors(t *testing.T) {
	const ok = "    user: root\n    agent: true\n    roles: {clients: true}\n"
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"misspelt field", "hosts:\n  - adress: 10.0.0.1\n" + ok, []string{`line 2: unknown field "adress"`}},
		{"no hosts", "defaults: {user: root}\n", []string{"no hosts"}},
		{"not YAML", "hosts: [", []string{"hosts.yaml:"}},
		{"port not a number", "hosts:\n  - address: h\n    port: ssh\n" + ok, []string{`line 3: "ssh": want a whole number`}},
		{"no address", "hosts:\n  - name: a\n" + ok, []string{`hosts.yaml:2: host "a" has no address`}},
		{"bad address", "hosts:\n  - address: a b\n" + ok, []string{`address "a b"`}},
		{"bad port in address", "hosts:\n  - address: h:99999\n" + ok, []string{`"99999"`}},
		{"bad port", "hosts:\n  - address: h\n    port: 0\n" + ok, []string{"port 0"}},
		{"no user", "hosts:\n  - address: h\n    agent: true\n    roles: {clients: true}\n", []string{"host h: no user"}},
		{"no key", "hosts:\n  - address: h\n    user: root\n    roles: {clients: true}\n", []string{"host h: no key"}},
		{"bad host key", "hosts:\n  - address: h\n    host_key: ssh-ed25519 nope\n" + ok, []string{"host h: host_key"}},
		{"no role", "hosts:\n  - address: h\n    user: root\n    agent: true\n", []string{"host h has no role"}},
		{"relative preload", "hosts:\n  - address: h\n    clock_preload: lib.so\n" + ok, []string{`clock_preload "lib.so"`}},
		{"relative work dir", "hosts:\n  - address: h\n    work_dir: run\n" + ok, []string{`work_dir "run"`}},
		{"server", "hosts:\n  - address: h\n    user: root\n    agent: true\n    roles:\n      servers:\n        - {backend: redis, data: rel, port: 70000, peer_port: -1}\n",
			[]string{`hosts.yaml:7: host h: server redis: data "rel"`, "port 70000", "peer_port -1"}},
		{"proxy port", "hosts:\n  - address: h\n    user: root\n    agent: true\n    roles:\n      servers:\n        - {backend: redis, data: /a, port: 60000}\n        - {backend: redlock, data: /b, port: 6379, proxy_port: 70000}\n        - {backend: etcd, data: /c, port: 2379, proxy_port: 6379}\n",
			[]string{"port 60000 has no default proxy_port", "proxy_port 70000", "port 6379 of server etcd (its proxy) is also that of server redlock"}},
		{"server", "hosts:\n  - address: h\n    user: root\n    agent: true\n    roles:\n      servers:\n        - {backend: redis, data: rel, port: 70000, peer_port: -1, sentinel_port: 65536}\n",
			[]string{`hosts.yaml:7: host h: server redis: data "rel"`, "port 70000", "peer_port -1", "sentinel_port 65536"}},
		{"server without backend", "hosts:\n  - address: h\n    user: root\n    agent: true\n    roles:\n      servers:\n        - {binary: /b, data: /d, port: 1}\n",
			[]string{"a server without a backend"}},
		{"one port twice", "hosts:\n  - address: h\n    user: root\n    agent: true\n    roles:\n      judge: {port: 6379}\n      servers:\n        - {backend: redis, binary: /b, data: /d, port: 6379}\n        - {backend: redlock, binary: /b, data: /d, port: 6380, peer_port: 6380}\n        - {backend: sentinel, data: /s, port: 6381, sentinel_port: 6379}\n",
			[]string{"port 6379 of the judge is also that of server redis", "port 6380 of server redlock (peers) is also that of server redlock", "data dir /d", "port 6379 of server sentinel (sentinel) is also that of"}},
		{"same name", "hosts:\n  - {name: a, address: h1, user: root, agent: true, roles: {clients: true}}\n  - {name: a, address: h2, user: root, agent: true, roles: {clients: true}}\n",
			[]string{`hosts.yaml:3: host name "a" is also that of the host at line 2`}},
		{"same address", "hosts:\n  - {address: h, user: root, agent: true, roles: {clients: true}}\n  - {name: b, address: 'h:22', user: root, agent: true, roles: {clients: true}}\n",
			[]string{"address h:22 is also that of the host at line 2"}},
		{"two judges", "hosts:\n  - {address: a, user: root, agent: true, roles: {judge: {}}}\n  - {address: b, user: root, agent: true, roles: {judge: {}}}\n",
			[]string{"2 hosts have the judge role (a, b)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := inventory.Parse([]byte(tc.doc), "hosts.yaml")
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts.yaml")
	if err := os.WriteFile(path, []byte("hosts:\n  - {address: h, user: root, identity_file: key, roles: {clients: true}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := inv.Hosts[0].IdentityFiles; len(got) != 1 || got[0] != filepath.Join(dir, "key") {
		t.Errorf("identity file %v, want it beside the inventory", got)
	}
	if _, err := inventory.Load(filepath.Join(dir, "absent.yaml")); err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Errorf("a missing file: %v", err)
	}
}
