// Package inventory reads the hosts a run spans — how the control node
// reaches each over SSH and what it does there (servers of a backend,
// client workers, the judge) — from a YAML file, and checks that each host
// can play its roles before a run (Check). It holds no secret: keys are
// named by their files or left to the agent, host keys are public.
//
//	defaults:                         # for every host that does not say
//	  work_dir: /var/lib/lockbench    # the run's files there (binary, workers)
//	  user: root
//	  identity_file: ~/.ssh/id_ed25519
//	  known_hosts: ~/.ssh/known_hosts
//	hosts:
//	  - name: redis-1
//	    address: 10.0.0.11            # its sshd: host or host:port
//	    host_key: ssh-ed25519 AAAA…   # optional: the key pinned here instead
//	    roles:
//	      servers:
//	        - backend: redlock
//	          binary: /usr/bin/redis-server
//	          data: /var/lib/lockbench/redlock
//	          port: 6379
//	        - backend: etcd           # no binary: the run uploads etcd-member
//	          data: /var/lib/lockbench/etcd
//	          port: 2379
//	          peer_port: 2380
//	  - name: client-1
//	    address: 10.0.0.21
//	    agent: true                   # keys from $SSH_AUTH_SOCK
//	    roles: {clients: true, judge: {port: 7070}}
package inventory

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lockbench/lockbench/remote"
)

// Inventory is the hosts of a run.
type Inventory struct {
	// Path is the file it was read from ("" if none).
	Path  string
	Hosts []Host
}

// Host is one host: how to reach it and its roles.
type Host struct {
	// Name names it in logs and results; the address's host by default.
	Name string
	// Address is its sshd, host:port.
	Address string
	// User is the login; not root means sudo, without a password.
	User string
	// IdentityFiles are private key files; Agent adds the agent's keys.
	IdentityFiles []string
	Agent         bool
	// HostKey, when set, pins the host's key ("ssh-ed25519 AAAA…" or a
	// known_hosts line); otherwise its key must be in KnownHosts.
	HostKey    string
	KnownHosts []string
	// ClockPreload is a prebuilt clock preload library on the host; when
	// empty, clock faults build it there (gcc).
	ClockPreload string
	// WorkDir is where a run keeps its files on the host: the lockbench
	// binary it uploads, its workers' assignments, pidfiles and logs.
	// DefaultWorkDir unless set.
	WorkDir string
	// Servers are the lock servers it runs.
	Servers []Server
	// Clients says whether client workers run on it.
	Clients bool
	// Judge, when set, runs the judge on it (else it runs on the control
	// node).
	Judge *Judge
	// Line is where the host is in the file.
	Line int
}

// Server is a lock server a host runs.
type Server struct {
	// Backend is the backend it serves (lockbench backends lists them).
	Backend string
	// Binary is the server's program on the host; "" is the backend's
	// usual one (Needs.Binary: redis-server, java), or the one the run
	// uploads (etcd-member).
	Binary string
	// Data is its data dir on the host.
	Data string
	// Port is where clients reach it; PeerPort, when not 0, where its
	// peers do (etcd's peer port, ZooKeeper's quorum port: 2380 and
	// 2888 if 0), and ElectionPort where ZooKeeper's servers elect their
	// leader (3888 if 0).
	Port, PeerPort, ElectionPort int
	// ProxyPort is where the proxy beside the server listens on its host
	// (proxy_port; Port+10000 when left out): its clients reach the
	// server through it, so that a latency fault can slow them.
	ProxyPort int
	// SentinelPort, for a Sentinel set's node, is where the sentinel that
	// runs beside it listens (26379 if 0).
	SentinelPort int
	Line         int
}

// DefaultProxyOffset is how far above a server's port its proxy listens
// when the inventory names no proxy_port.
const DefaultProxyOffset = 10000

// Judge is the judge's role.
type Judge struct {
	// Port is where workers report; 7070 by default.
	Port int
}

// DefaultJudgePort is where a judge listens unless the inventory says.
const DefaultJudgePort = 7070

// DefaultWorkDir is a host's WorkDir unless the inventory says.
const DefaultWorkDir = "/var/lib/lockbench"

// CheckBackends checks that every server's backend is one of known.
func (inv *Inventory) CheckBackends(known []string) error {
	var errs []error
	for _, h := range inv.Hosts {
		for _, s := range h.Servers {
			if s.Backend != "" && !slices.Contains(known, s.Backend) {
				errs = append(errs, fmt.Errorf("%s:%d: host %s: unknown backend %q (known: "+
					"%s)", inv.Path, s.Line, h.Name, s.Backend, strings.Join(known, ", ")))
			}
		}
	}
	return errors.Join(errs...)
}

// SSHConfig is how the control node reaches h.
func (h *Host) SSHConfig() remote.SSHConfig {
	cfg := remote.SSHConfig{
		Name: h.Name, Addr: h.Address, User: h.User,
		IdentityFiles: h.IdentityFiles, Agent: h.Agent, KnownHosts: h.KnownHosts,
	}
	if h.HostKey != "" {
		cfg.HostKeys = []string{h.HostKey}
	}
	return cfg
}

// Roles says in words what h does, for logs.
func (h *Host) Roles() string {
	var r []string
	for _, s := range h.Servers {
		r = append(r, fmt.Sprintf("%s server on :%d", s.Backend, s.Port))
	}
	if h.Clients {
		r = append(r, "clients")
	}
	if h.Judge != nil {
		r = append(r, fmt.Sprintf("judge on :%d", h.Judge.Port))
	}
	return strings.Join(r, ", ")
}
