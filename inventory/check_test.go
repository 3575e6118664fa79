package inventory_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"

	"github.com/lockbench/lockbench/inventory"
	"github.com/lockbench/lockbench/remote"
	"github.com/lockbench/lockbench/remote/remotetest"
)

// labInventory writes an inventory of lab's hosts: body is its hosts
// section, with %[1]s … standing for the hosts' addresses; defaults give
// the lab's key and known_hosts.
func labInventory(t *testing.T, lab *remotetest.Lab, body string) string {
	t.Helper()
	var addrs []any
	for _, h := range lab.Hosts {
		addrs = append(addrs, h.Addr.String())
	}
	doc := fmt.Sprintf("defaults:\n  user: root\n  identity_file: %s\n  known_hosts: %s\nhosts:\n", lab.KeyFile, lab.KnownHosts) +
		fmt.Sprintf(body, addrs...)
	path := filepath.Join(t.TempDir(), "hosts.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheck runs every check on simulated hosts: one that has all its
// roles need but a port taken, one reached through sudo, one that lacks
// /dev/fuse, gcc, ip, a server binary and a data dir, one whose user has
// no sudo, one whose key is not on record and one whose key differs from
// the pinned one. A server that names no binary is checked against what
// its backend needs (the usual binary and the files it reads, or none
// when the run uploads it). Each failure is named, and only those fail.
func TestCheck(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var hide []string // what host3 lacks: gcc and ip, wherever they are
	for _, prog := range []string{"gcc", "ip"} {
		p, err := exec.LookPath(prog)
		if err != nil {
			p, err = exec.LookPath("/usr/sbin/" + prog)
		}
		if err != nil {
			t.Skipf("no %s here to hide on a host: %v", prog, err)
		}
		hide = append(hide, p)
	}
	// A file the needs below name for zookeeper (a stand-in for its
	// jars, which hosts have here), absent on host3 too.
	const jar = "/etc/os-release"
	if _, err := os.Stat(jar); err != nil {
		t.Skip(err)
	}
	lab := remotetest.New(t, 6, remotetest.Hide(2, append(hide, "/dev/fuse", jar)...))

	// Something listens on host1's port 6380.
	s1 := lab.Dial(t, 0, "root")
	taken, err := remote.Start(ctx, s1, remote.Daemon{
		Path: "redis-server", Args: []string{"--port", "6380", "--save", "", "--appendonly", "no"}, Pidfile: "/tmp/taken/redis.pid",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = taken.Kill(context.Background()) })
	for {
		if out, _ := remote.Output(ctx, s1, "redis-cli", "-p", "6380", "ping"); strings.TrimSpace(string(out)) == "PONG" {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("redis on 6380 not ready")
		}
	}

	// host5's key is not in this known_hosts; host6 pins another key.
	partial := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(partial, []byte(lab.Hosts[0].KnownHostsLine()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := ssh.NewPublicKey(pub)
	path := labInventory(t, lab, `
  - name: full
    address: %[1]s
    roles:
      clients: true
      servers:
        - {backend: redis, binary: redis-server, data: /tmp/lockbench/redis, port: 6379}
        - {backend: redlock, binary: /usr/bin/redis-server, data: /tmp, port: 6380}
        - {backend: etcd, data: /tmp/lockbench/etcd, port: 2379}
        - {backend: zookeeper, data: /tmp/lockbench/zookeeper, port: 2181}
  - name: sudo
    address: %[2]s
    user: `+remotetest.Sudoer+`
    roles: {clients: true, judge: {port: 7070}}
  - name: bare
    address: %[3]s
    roles:
      servers:
        - {backend: zookeeper, binary: /usr/bin/no-such-zookeeper, data: /etc/passwd/zk, port: 2181, peer_port: 2888}
  - name: nosudo
    address: %[4]s
    user: `+remotetest.Guest+`
    roles: {clients: true}
  - name: unknown
    address: %[5]s
    known_hosts: `+partial+`
    roles: {clients: true}
  - name: impostor
    address: %[6]s
    host_key: `+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(other)))+`
    roles: {clients: true}
`)
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	needs := func(backend string) inventory.Needs {
		switch backend {
		case "etcd":
			return inventory.Needs{Uploaded: "etcd-member"}
		case "zookeeper":
			return inventory.Needs{Binary: "sh", Files: []string{jar}}
		}
		return inventory.Needs{}
	}
	found := inventory.Check(ctx, inv, needs)
	t.Logf("%d checks of %d hosts in %v", len(found), len(inv.Hosts), time.Since(start))
	wantFail := map[string][]string{
		"full":     {"port 6380"},
		"bare":     {"ip rules", "server zookeeper binary", "server zookeeper files", "server zookeeper data", "fuse", "clock preload"},
		"nosudo":   {"privilege"},
		"unknown":  {"ssh"},
		"impostor": {"ssh"},
	}
	if !remotetest.SudoAvailable() {
		wantFail["sudo"] = []string{"privilege"}
	}
	wantText := map[string]string{
		"port 6380":               "in use",
		"server zookeeper data":   "/etc/passwd is not a dir",
		"server zookeeper binary": "/usr/bin/no-such-zookeeper",
		"server zookeeper files":  "missing " + jar,
		"fuse":                    "/dev/fuse",
		"clock preload":           "no gcc",
		"ip rules":                "no ip command",
	}
	checks := map[string][]string{}
	for _, f := range found {
		t.Logf("%-9s %-24s %-5v %s", f.Host, f.Check, f.OK, f.Detail)
		checks[f.Host] = append(checks[f.Host], f.Check)
		if failing := slices.Contains(wantFail[f.Host], f.Check); f.OK == failing {
			t.Errorf("%s: %s ok=%v: %s", f.Host, f.Check, f.OK, f.Detail)
		}
		if w, ok := wantText[f.Check]; ok && !f.OK && !strings.Contains(f.Detail, w) {
			t.Errorf("%s: %s: %q does not say %q", f.Host, f.Check, f.Detail, w)
		}
	}
	for host, want := range map[string][]string{
		"full": {"ssh", "privilege", "system", "tools", "ip rules", "server redis binary", "server redis data",
			"server redlock binary", "server redlock data", "server etcd binary", "server etcd data",
			"server zookeeper binary", "server zookeeper files", "server zookeeper data", "fuse", "clock preload", "forwarding",
			"port 6379", "port 16379", "port 6380", "port 16380", "port 2379", "port 12379", "port 2181", "port 12181"},
		"sudo":     {"ssh", "privilege", "system", "tools", "ip rules", "port 7070"},
		"bare":     {"ssh", "privilege", "system", "tools", "ip rules", "server zookeeper binary", "server zookeeper files", "server zookeeper data", "fuse", "clock preload", "forwarding", "port 2181", "port 2888", "port 12181"},
		"nosudo":   {"ssh", "privilege"},
		"unknown":  {"ssh"},
		"impostor": {"ssh"},
	} {
		if !remotetest.SudoAvailable() && host == "sudo" {
			continue
		}
		if !slices.Equal(checks[host], want) {
			t.Errorf("%s: checks %v, want %v", host, checks[host], want)
		}
	}
}

// TestCheckDataDirAsAccount checks each data dir as the account its
// server runs as: a PostgreSQL data dir under /root (mode 0700) passes
// root's check but not the postgres account's, which the run would hand
// it to; the same place is fine for a server that runs as root, and a
// PostgreSQL data dir under /tmp passes both.
func TestCheckDataDirAsAccount(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	if st, err := os.Stat("/root"); err != nil || st.Mode().Perm()&0o001 != 0 {
		t.Skipf("/root is not closed to other accounts here (%v)", err)
	}
	if _, err := user.Lookup("postgres"); err != nil {
		t.Skipf("no postgres account here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lab := remotetest.New(t, 2)
	path := labInventory(t, lab, `
  - name: closed
    address: %[1]s
    roles:
      servers:
        - {backend: redis, binary: sh, data: /root/lockbench-check/redis, port: 6379}
        - {backend: postgres, binary: sh, data: /root/lockbench-check/postgres, port: 5432}
  - name: open
    address: %[2]s
    roles:
      servers:
        - {backend: postgres, binary: sh, data: /tmp/lockbench/postgres, port: 5432}
`)
	inv, err := inventory.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	needs := func(backend string) inventory.Needs {
		if backend == "postgres" {
			return inventory.Needs{Account: "postgres"}
		}
		return inventory.Needs{}
	}
	got := map[string]inventory.Finding{}
	for _, f := range inventory.Check(ctx, inv, needs) {
		t.Logf("%-7s %-32s %-5v %s", f.Host, f.Check, f.OK, f.Detail)
		got[f.Host+" "+f.Check] = f
	}
	for _, tc := range []struct {
		check string
		ok    bool
		says  string
	}{
		{"closed server redis data", true, ""},
		{"closed server postgres data", true, ""},
		{"closed server postgres data as postgres", false, "postgres cannot enter /root"},
		{"open server postgres data", true, ""},
		{"open server postgres data as postgres", true, "postgres can enter /tmp"},
	} {
		f, ok := got[tc.check]
		switch {
		case !ok:
			t.Errorf("%s: not checked", tc.check)
		case f.OK != tc.ok:
			t.Errorf("%s: ok=%v, want %v: %s", tc.check, f.OK, tc.ok, f.Detail)
		case !strings.Contains(f.Detail, tc.says):
			t.Errorf("%s: %q does not say %q", tc.check, f.Detail, tc.says)
		}
	}
	if _, ok := got["closed server redis data as postgres"]; ok {
		t.Error("a server that runs as root was checked as postgres")
	}
}
