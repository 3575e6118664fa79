package inventory

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/lockbench/lockbench/remote"
)

// Finding is the outcome of one check on one host.
type Finding struct {
	Host  string
	Check string
	OK    bool
	// Detail says what was found, or what is wrong and what needs it.
	Detail string
}

// Needs is what a server of a backend needs on its host, as a run starts
// it there: what Check looks for beside the inventory's binary.
type Needs struct {
	// Binary is the program a server runs when the inventory names none,
	// found on the host's PATH; "" when the inventory must name one.
	Binary string
	// Uploaded, when set, names the program the run uploads to the host
	// when the inventory names no binary (etcd-member): nothing to find
	// there then.
	Uploaded string
	// Files are the files the server reads on its host (ZooKeeper's
	// jars), each of which must be there, readable and not empty.
	Files []string
	// Account, when set, is the account the server runs as on its host
	// (PostgreSQL refuses root: "postgres"): it must exist and be able to
	// reach the data dir, or the place it will be made in, through every
	// parent dir. Empty means the server runs as root.
	Account string
}

// Check verifies every host of inv at once, as a run would use it: SSH
// with the host key verified, root or sudo without a password, a Linux
// whose architecture this lockbench binary runs on, the shell tools that
// remote's operations use, ip and policy rules where cuts go (hosts with
// servers or clients), each server's binary (the inventory's, or the
// one needs says a server of its backend runs, unless the run uploads
// it), the files it reads and its data dir, /dev/fuse (power loss) and
// gcc or a prebuilt clock preload (clock faults) on server hosts, and
// that nothing listens on a port a role needs. A host that cannot be
// reached, or whose user may not act as root, gets no further checks.
// Findings come host by host, in the inventory's order. needs may be nil:
// every server must then name its binary.
func Check(ctx context.Context, inv *Inventory, needs func(backend string) Needs) []Finding {
	if needs == nil {
		needs = func(string) Needs { return Needs{} }
	}
	found := make([][]Finding, len(inv.Hosts))
	var wg sync.WaitGroup
	for i := range inv.Hosts {
		wg.Go(func() { found[i] = checkHost(ctx, &inv.Hosts[i], needs) })
	}
	wg.Wait()
	var all []Finding
	for _, f := range found {
		all = append(all, f...)
	}
	return all
}

// hostCheck gathers the findings of one host.
type hostCheck struct {
	h     *Host
	s     *remote.SSH
	found []Finding
}

func (c *hostCheck) add(check string, ok bool, format string, args ...any) {
	c.found = append(c.found, Finding{Host: c.h.Name, Check: check, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// run runs a script on the host and returns its output, trimmed.
func (c *hostCheck) run(ctx context.Context, script string, args ...string) (string, error) {
	out, err := remote.Output(ctx, c.s, "sh", append([]string{"-c", script, "lockbench-check"}, args...)...)
	return strings.TrimSpace(string(out)), err
}

func checkHost(ctx context.Context, h *Host, needs func(string) Needs) []Finding {
	c := &hostCheck{h: h}
	s, err := remote.DialSSH(ctx, h.SSHConfig())
	if err != nil {
		c.add("ssh", false, "%v", err)
		return c.found
	}
	defer s.Close()
	c.s = s
	c.add("ssh", true, "%s@%s, host key %s verified", h.User, h.Address, ssh.FingerprintSHA256(s.HostKey()))
	if !c.privilege(ctx) {
		return c.found
	}
	c.system(ctx)
	c.tools(ctx)
	if len(h.Servers) > 0 || h.Clients {
		c.ipRules(ctx)
	}
	for _, sv := range h.Servers {
		c.server(ctx, sv, needs(sv.Backend))
	}
	if len(h.Servers) > 0 {
		c.fuse(ctx)
		c.clock(ctx)
		c.forwarding(ctx)
	}
	c.ports(ctx)
	return c.found
}

// privilege checks that commands run as root: the login is root, or sudo
// lets it without a password.
func (c *hostCheck) privilege(ctx context.Context) bool {
	if c.s.Root() {
		c.add("privilege", true, "root")
		return true
	}
	out, err := c.run(ctx, "id -u")
	if err != nil || out != "0" {
		why := err
		if e, ok := remote.IsExit(err); ok {
			why = errors.New(strings.TrimSpace(e.Stderr))
		}
		c.add("privilege", false, "%s is not root and `sudo -n` does not make it root (%v): faults need root; give %s passwordless sudo or log "+
			"in as root (no further checks)",
			c.h.User, why, c.h.User)
		return false
	}
	c.add("privilege", true, "%s, root through sudo", c.h.User)
	return true
}

// goarch maps `uname -m` to Go's architecture names.
var goarch = map[string]string{
	"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64",
	"armv7l": "arm", "armv6l": "arm", "i686": "386", "i386": "386",
	"ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64", "loongarch64": "loong64",
}

// system checks that the host runs Linux on this binary's architecture:
// a run uploads this lockbench binary there.
func (c *hostCheck) system(ctx context.Context) {
	out, err := c.run(ctx, "uname -sm")
	if err != nil {
		c.add("system", false, "uname: %v", err)
		return
	}
	kernel, machine, _ := strings.Cut(out, " ")
	arch := goarch[machine]
	switch {
	case kernel != "Linux":
		c.add("system", false, "%s: lockbench runs servers, workers and faults on Linux only", out)
	case arch != runtime.GOARCH:
		c.add("system", false, "%s: this lockbench is built for %s; build one for the host with GOARCH=%s CGO_ENABLED=0",
			out, runtime.GOARCH, cmp.Or(arch, "?"))
	default:
		c.add("system", true, "%s", out)
	}
}

// tools checks the programs remote's shell operations use.
func (c *hostCheck) tools(ctx context.Context) {
	out, err := c.run(ctx, `for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "$t"; done`,
		"cat", "mkdir", "mv", "chmod", "chown", "rm", "dirname", "id", "sort", "sleep", "awk", "setsid", "setpriv")
	switch {
	case err != nil:
		c.add("tools", false, "%v", err)
	case out != "":
		c.add("tools", false, "missing %s: starting servers, signalling them and moving files need them (coreutils, awk, "+
			"util-linux)", strings.Join(strings.Fields(out), ", "))
	default:
		c.add("tools", true, "sh, coreutils, awk, setsid, setpriv")
	}
}

// ipRules checks that ip can add and delete a blackhole policy rule, as a
// cut does (toward 192.0.2.255, an address of documentation's TEST-NET).
func (c *hostCheck) ipRules(ctx context.Context) {
	pref := strconv.Itoa(remote.CutPref)
	out, err := c.run(ctx, `PATH=$PATH:/usr/sbin:/sbin
command -v ip >/dev/null || { echo "no ip command: install iproute2"; exit 1; }
ip rule add to 192.0.2.255 blackhole pref `+pref+` 2>&1 || exit 1
ip rule del to 192.0.2.255 blackhole pref `+pref+` 2>&1 || exit 1
ip -V`)
	if err != nil {
		c.add("ip rules", false, "%s: partitions cut links with ip rules (no nft or iptables needed)", firstLine(out, err))
		return
	}
	c.add("ip rules", true, "%s, blackhole rules work", out)
}

func firstLine(out string, err error) string {
	if out != "" {
		l, _, _ := strings.Cut(out, "\n")
		return l
	}
	return err.Error()
}

// server checks a server role's binary, the files it reads, and its data
// dir.
func (c *hostCheck) server(ctx context.Context, sv Server, need Needs) {
	name := "server " + sv.Backend
	switch bin := cmp.Or(sv.Binary, need.Binary); {
	case sv.Binary == "" && need.Uploaded != "":
		c.add(name+" binary", true, "none named: the run uploads its %s (under %s/bin)", need.Uploaded, c.h.WorkDir)
	case bin == "":
		c.add(name+" binary", false, "no binary named, and a %s server has no usual one: name it (binary:)", sv.Backend)
	default:
		out, err := c.run(ctx, `p=$(command -v -- "$1") && [ -x "$p" ] && [ ! -d "$p" ] && echo "$p"`, bin)
		if err != nil {
			c.add(name+" binary", false, "%s: not found, or not executable", bin)
		} else {
			c.add(name+" binary", true, "%s", out)
		}
	}
	if len(need.Files) > 0 {
		out, err := c.run(ctx, `for f; do [ -r "$f" ] && [ -s "$f" ] || echo "$f"; done`, need.Files...)
		switch {
		case err != nil:
			c.add(name+" files", false, "%v", err)
		case out != "":
			c.add(name+" files", false, "missing %s: a %s server reads them (its Debian "+
				"package)", strings.Join(strings.Fields(out), ", "), sv.Backend)
		default:
			c.add(name+" files", true, "%s", strings.Join(need.Files, ", "))
		}
	}
	// The data dir, or the dir it will be made in, must be writable (a
	// read-only file system is not, even for root).
	out, err := c.run(ctx, `d=$1
while [ ! -e "$d" ]; do d=$(dirname -- "$d"); done
[ -d "$d" ] || { echo "$d is not a dir"; exit 1; }
[ -w "$d" ] || { echo "$d is not writable"; exit 1; }
echo "$d"`, sv.Data)
	switch {
	case err != nil:
		c.add(name+" data", false, "%s: %s", sv.Data, firstLine(out, err))
		return
	case out == sv.Data:
		c.add(name+" data", true, "%s exists, writable", sv.Data)
	default:
		c.add(name+" data", true, "%s will be made in %s", sv.Data, out)
	}
	if need.Account != "" {
		c.account(ctx, name, sv.Data, out, need.Account)
	}
}

// account checks, as the account the server runs as, that it can enter
// dir, the data dir or the nearest dir of its path that exists (the run
// makes the rest and hands it to the account): root passing the data
// check says nothing of an account that cannot pass a parent of it.
func (c *hostCheck) account(ctx context.Context, name, data, dir, account string) {
	out, err := c.run(ctx, `id -u -- "$1" >/dev/null 2>&1 || { echo "no account $1 on the host"; exit 1; }
setpriv --reuid="$1" --regid="$(id -g -- "$1")" --init-groups sh -c 'cd -- "$1"' sh "$2" 2>/dev/null ||
	{ echo "$1 cannot enter $2"; exit 1; }`, account, dir)
	if err != nil {
		c.add(name+" data as "+account, false, "%s: %s: the server runs as %s", data, firstLine(out, err), account)
		return
	}
	c.add(name+" data as "+account, true, "%s can enter %s", account, dir)
}

// fuse checks /dev/fuse, which power-loss faults mount data dirs with.
func (c *hostCheck) fuse(ctx context.Context) {
	if _, err := c.run(ctx, `[ -c /dev/fuse ]`); err != nil {
		c.add("fuse", false, "no /dev/fuse: power-loss faults need it (modprobe fuse)")
		return
	}
	c.add("fuse", true, "/dev/fuse")
}

// clock checks what clock faults preload into servers: a prebuilt
// library, or gcc to build it.
func (c *hostCheck) clock(ctx context.Context) {
	if p := c.h.ClockPreload; p != "" {
		if _, err := c.run(ctx, `[ -f "$1" ] && [ -r "$1" ]`, p); err != nil {
			c.add("clock preload", false, "clock_preload %s: not a readable file", p)
			return
		}
		c.add("clock preload", true, "%s", p)
		return
	}
	out, err := c.run(ctx, `command -v gcc || command -v cc`)
	if err != nil {
		c.add("clock preload", false, "no gcc and no clock_preload: clock faults need one (install gcc, or name a prebuilt library)")
		return
	}
	c.add("clock preload", true, "built with %s", out)
}

// forwarding checks that the host's sshd opens connections for the
// control node (direct-tcpip channels, AllowTcpForwarding): the proxy
// beside each server takes its faults on the host's loopback only, and
// the control node reaches it so. It asks for the host's own sshd on
// loopback; a channel sshd opened, or tried to (the port is closed
// there), shows forwarding is allowed.
func (c *hostCheck) forwarding(ctx context.Context) {
	_, port, err := net.SplitHostPort(c.h.Address)
	if err != nil {
		port = "22"
	}
	conn, err := c.s.Dial(ctx, "tcp", net.JoinHostPort("127.0.0.1", port))
	var oc *ssh.OpenChannelError
	if err == nil {
		conn.Close()
	}
	switch {
	case err == nil, errors.As(err, &oc) && oc.Reason == ssh.ConnectionFailed:
		c.add("forwarding", true, "sshd opens connections on the host for the control node (the proxies' APIs are reached so)")
	default:
		c.add("forwarding", false, "sshd does not open connections on the host for the control node (AllowTcpForwarding; the proxies' APIs, on "+
			"the host's loopback, are reached so, and latency faults need them): %v", err)
	}
}

// ports checks that nothing listens on a port a role of the host needs.
func (c *hostCheck) ports(ctx context.Context) {
	type want struct {
		port int
		what string
	}
	var ports []want
	for _, s := range c.h.Servers {
		ports = append(ports, want{s.Port, "server " + s.Backend})
		if s.PeerPort != 0 {
			ports = append(ports, want{s.PeerPort, "server " + s.Backend + " (peers)"})
		}
		if s.ProxyPort != 0 {
			ports = append(ports, want{s.ProxyPort, "server " + s.Backend + " (its proxy)"})
		}
		if s.SentinelPort != 0 {
			ports = append(ports, want{s.SentinelPort, "server " + s.Backend + " (sentinel)"})
		}
	}
	if c.h.Judge != nil {
		ports = append(ports, want{c.h.Judge.Port, "the judge"})
	}
	if len(ports) == 0 {
		return
	}
	out, err := c.run(ctx, `cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; true`)
	if err != nil {
		c.add("ports", false, "reading the listening sockets: %v", err)
		return
	}
	listening := listeners(out)
	for _, w := range ports {
		if listening[w.port] {
			c.add("port "+strconv.Itoa(w.port), false, "in use: something listens on it, and %s needs it", w.what)
		} else {
			c.add("port "+strconv.Itoa(w.port), true, "free for %s", w.what)
		}
	}
}

// listeners are the TCP ports in state LISTEN in /proc/net/tcp{,6}.
func listeners(table string) map[int]bool {
	ports := map[int]bool{}
	sc := bufio.NewScanner(strings.NewReader(table))
	for sc.Scan() {
		// sl local_address rem_address st …: "0: 0100007F:1F90 00000000:0000 0A …"
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil {
			ports[int(p)] = true
		}
	}
	return ports
}
