// Reading an inventory: its YAML decoded strictly, every error naming the
// file, the line and the bad value, defaults applied, ports checked.

package inventory

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/lockbench/lockbench/remote"
)

// Load reads and checks the inventory at path.
func Load(path string) (*Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return Parse(b, path)
}

// The YAML decoder's words for a misspelt field and a value of the wrong
// kind, which name Go types, and the inventory's.
var (
	unknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)
	wrongKind    = regexp.MustCompile("cannot unmarshal !!\\w+ `([^`]*)` into (\\*?)(\\w+)")
	kinds        = map[string]string{"int": "a whole number", "bool": "true or false", "string": "a string"}
)

// decodeError rewrites a decoder error in the inventory's words.
func decodeError(err error) string {
	msg := unknownField.ReplaceAllString(err.Error(), `unknown field "$1"`)
	msg = wrongKind.ReplaceAllStringFunc(msg, func(m string) string {
		sub := wrongKind.FindStringSubmatch(m)
		want, ok := kinds[sub[3]]
		if !ok {
			want = "a " + sub[3]
		}
		return fmt.Sprintf("%q: want %s", sub[1], want)
	})
	return strings.TrimPrefix(msg, "yaml: ")
}

// Parse reads an inventory from data, whose relative paths are relative
// to path's dir (the working dir if path is ""). Every error names the
// file, the line and the bad value.
func Parse(data []byte, path string) (*Inventory, error) {
	where := path
	if where == "" {
		where = "inventory"
	}
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %s", where, decodeError(err))
	}
	if len(f.Hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts", where)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil {
		lines(&doc, &f)
	}
	home, _ := os.UserHomeDir()
	p := parser{where: where, dir: filepath.Dir(path), home: home}
	if path == "" {
		p.dir = "."
	}
	inv := &Inventory{Path: path}
	for _, rh := range f.Hosts {
		inv.Hosts = append(inv.Hosts, p.host(rh, f.Defaults))
	}
	p.across(inv)
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	return inv, nil
}

// parser gathers every error of a file, so that one run names them all.
type parser struct {
	where, dir, home string
	errs             []error
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s:%d: "+format, append([]any{p.where, line}, args...)...))
}

// path resolves a path of the control node: ~ is the home dir, a
// relative path is relative to the inventory's dir.
func (p *parser) path(s string) string {
	switch {
	case s == "~":
		return p.home
	case strings.HasPrefix(s, "~/"):
		return filepath.Join(p.home, s[2:])
	case s == "" || filepath.IsAbs(s):
		return s
	}
	return filepath.Join(p.dir, s)
}

func pick[T any](own, dflt *T) (T, bool) {
	switch {
	case own != nil:
		return *own, true
	case dflt != nil:
		return *dflt, true
	}
	var zero T
	return zero, false
}

// host checks one host and fills what it leaves out from the defaults.
func (p *parser) host(rh rawHost, d access) Host {
	h := Host{Name: rh.Name, Line: rh.line, Clients: rh.Roles.Clients, HostKey: strings.TrimSpace(rh.HostKey)}
	port, hasPort := pick(rh.Port, d.Port)
	if hasPort && (port < 1 || port > 65535) {
		p.errorf(rh.line, "port %d: want 1 to 65535", port)
	}
	if !hasPort {
		port = 22
	}
	switch host, hp, err := net.SplitHostPort(rh.Address); {
	case rh.Address == "":
		p.errorf(rh.line, "host %q has no address", rh.Name)
	case err == nil:
		if n, err := strconv.Atoi(hp); err != nil || n < 1 || n > 65535 {
			p.errorf(rh.line, "address %q: port %q: want 1 to 65535", rh.Address, hp)
		}
		h.Address = net.JoinHostPort(host, hp)
	case strings.ContainsAny(rh.Address, " /"):
		p.errorf(rh.line, "address %q: want a host name or IP, with an optional :port", rh.Address)
	default:
		h.Address = net.JoinHostPort(strings.Trim(rh.Address, "[]"), strconv.Itoa(port))
	}
	if h.Name == "" && h.Address != "" {
		h.Name, _, _ = net.SplitHostPort(h.Address)
	}
	name := h.Name
	h.User, _ = pick(rh.User, d.User)
	if h.User == "" {
		p.errorf(rh.line, "host %s: no user (set user here or in defaults)", name)
	}
	if f, ok := pick(rh.IdentityFile, d.IdentityFile); ok && f != "" {
		h.IdentityFiles = []string{p.path(f)}
	}
	h.Agent, _ = pick(rh.Agent, d.Agent)
	if len(h.IdentityFiles) == 0 && !h.Agent {
		p.errorf(rh.line, "host %s: no key (set identity_file or agent: true, here or in defaults)", name)
	}
	if kh, ok := pick(rh.KnownHosts, d.KnownHosts); ok && kh != "" {
		h.KnownHosts = []string{p.path(kh)}
	}
	if h.HostKey != "" {
		if _, err := remote.ParseHostKey(h.HostKey); err != nil {
			p.errorf(rh.line, "host %s: host_key: %v", name, err)
		}
	}
	h.ClockPreload, _ = pick(rh.ClockPreload, d.ClockPreload)
	if h.ClockPreload != "" && !filepath.IsAbs(h.ClockPreload) {
		p.errorf(rh.line, "host %s: clock_preload %q: want an absolute path on the host", name, h.ClockPreload)
	}
	h.WorkDir, _ = pick(rh.WorkDir, d.WorkDir)
	if h.WorkDir == "" {
		h.WorkDir = DefaultWorkDir
	}
	if !filepath.IsAbs(h.WorkDir) || filepath.Clean(h.WorkDir) == "/" {
		p.errorf(rh.line, "host %s: work_dir %q: want an absolute path on the host, below /", name, h.WorkDir)
	}
	for _, rs := range rh.Roles.Servers {
		h.Servers = append(h.Servers, p.server(name, rs))
	}
	if rj := rh.Roles.Judge; rj != nil {
		h.Judge = &Judge{Port: rj.Port}
		if h.Judge.Port == 0 {
			h.Judge.Port = DefaultJudgePort
		}
		if h.Judge.Port < 1 || h.Judge.Port > 65535 {
			p.errorf(rh.line, "host %s: judge port %d: want 1 to 65535", name, rj.Port)
		}
	}
	if len(h.Servers) == 0 && !h.Clients && h.Judge == nil {
		p.errorf(rh.line, "host %s has no role (roles: servers, clients or judge)", name)
	}
	p.ports(h)
	return h
}

// server checks one server role of host name.
func (p *parser) server(name string, rs rawServer) Server {
	s := Server{Backend: rs.Backend, Binary: rs.Binary, Data: rs.Data, Port: rs.Port, PeerPort: rs.PeerPort, ElectionPort: rs.ElectionPort,
		ProxyPort: rs.ProxyPort, SentinelPort: rs.SentinelPort, Line: rs.line}
	if s.Backend == "" {
		p.errorf(rs.line, "host %s: a server without a backend", name)
	}
	if !filepath.IsAbs(s.Data) {
		p.errorf(rs.line, "host %s: server %s: data %q: want an absolute path on the host", name, s.Backend, s.Data)
	}
	if s.Port < 1 || s.Port > 65535 {
		p.errorf(rs.line, "host %s: server %s: port %d: want 1 to 65535", name, s.Backend, s.Port)
	}
	if s.PeerPort < 0 || s.PeerPort > 65535 {
		p.errorf(rs.line, "host %s: server %s: peer_port %d: want 1 to 65535 (or none)", name, s.Backend, s.PeerPort)
	}
	if s.ElectionPort < 0 || s.ElectionPort > 65535 {
		p.errorf(rs.line, "host %s: server %s: election_port %d: want 1 to 65535 (or none)", name, s.Backend, s.ElectionPort)
	}
	switch {
	case s.ProxyPort == 0 && s.Port >= 1 && s.Port+DefaultProxyOffset <= 65535:
		s.ProxyPort = s.Port + DefaultProxyOffset
	case s.ProxyPort == 0 && s.Port >= 1:
		p.errorf(rs.line, "host %s: server %s: port %d has no default proxy_port (port+%d is beyond 65535): name "+
			"one", name, s.Backend, s.Port, DefaultProxyOffset)
	case s.ProxyPort < 0 || s.ProxyPort > 65535:
		p.errorf(rs.line, "host %s: server %s: proxy_port %d: want 1 to 65535", name, s.Backend, s.ProxyPort)
	}
	if s.SentinelPort < 0 || s.SentinelPort > 65535 {
		p.errorf(rs.line, "host %s: server %s: sentinel_port %d: want 1 to 65535 (or none)", name, s.Backend, s.SentinelPort)
	}
	return s
}

// ports checks that no two roles of h want one port, or two servers one
// data dir.
func (p *parser) ports(h Host) {
	used := map[int]string{}
	take := func(port int, line int, what string) {
		if port == 0 {
			return
		}
		if other, ok := used[port]; ok {
			p.errorf(line, "host %s: port %d of %s is also that of %s", h.Name, port, what, other)
			return
		}
		used[port] = what
	}
	data := map[string]string{}
	for _, s := range h.Servers {
		take(s.Port, s.Line, "server "+s.Backend)
		take(s.PeerPort, s.Line, "server "+s.Backend+" (peers)")
		take(s.ElectionPort, s.Line, "server "+s.Backend+" (election)")
		take(s.ProxyPort, s.Line, "server "+s.Backend+" (its proxy)")
		take(s.SentinelPort, s.Line, "server "+s.Backend+" (sentinel)")
		if other, ok := data[filepath.Clean(s.Data)]; ok && s.Data != "" {
			p.errorf(s.Line, "host %s: data dir %s of server %s is also that of server %s", h.Name, s.Data, s.Backend, other)
		}
		data[filepath.Clean(s.Data)] = s.Backend
	}
	if h.Judge != nil {
		take(h.Judge.Port, h.Line, "the judge")
	}
}

// across checks what spans hosts: names and addresses unique, one judge.
func (p *parser) across(inv *Inventory) {
	names, addrs := map[string]int{}, map[string]int{}
	var judges []string
	for _, h := range inv.Hosts {
		if l, ok := names[h.Name]; ok && h.Name != "" {
			p.errorf(h.Line, "host name %q is also that of the host at line %d", h.Name, l)
		}
		names[h.Name] = h.Line
		if l, ok := addrs[h.Address]; ok && h.Address != "" {
			p.errorf(h.Line, "host %s: address %s is also that of the host at line %d", h.Name, h.Address, l)
		}
		addrs[h.Address] = h.Line
		if h.Judge != nil {
			judges = append(judges, h.Name)
		}
	}
	if len(judges) > 1 {
		p.errs = append(p.errs, fmt.Errorf("%s: %d hosts have the judge role (%s): one at "+
			"most", p.where, len(judges), strings.Join(judges, ", ")))
	}
}

// The file's shape. Pointers tell a field left out from one set to its
// zero value, so that defaults fill only what a host leaves out.
type (
	file struct {
		Defaults access    `yaml:"defaults"`
		Hosts    []rawHost `yaml:"hosts"`
	}
	access struct {
		User         *string `yaml:"user"`
		Port         *int    `yaml:"port"`
		IdentityFile *string `yaml:"identity_file"`
		Agent        *bool   `yaml:"agent"`
		KnownHosts   *string `yaml:"known_hosts"`
		ClockPreload *string `yaml:"clock_preload"`
		WorkDir      *string `yaml:"work_dir"`
	}
	rawHost struct {
		access  `yaml:",inline"`
		Name    string `yaml:"name"`
		Address string `yaml:"address"`
		HostKey string `yaml:"host_key"`
		Roles   struct {
			Servers []rawServer `yaml:"servers"`
			Clients bool        `yaml:"clients"`
			Judge   *rawJudge   `yaml:"judge"`
		} `yaml:"roles"`
		line int
	}
	rawServer struct {
		Backend      string `yaml:"backend"`
		Binary       string `yaml:"binary"`
		Data         string `yaml:"data"`
		Port         int    `yaml:"port"`
		PeerPort     int    `yaml:"peer_port"`
		ElectionPort int    `yaml:"election_port"`
		ProxyPort    int    `yaml:"proxy_port"`
		SentinelPort int    `yaml:"sentinel_port"`
		line         int
	}
	rawJudge struct {
		Port int `yaml:"port"`
	}
)

// lines records where each host and each server is in the document.
func lines(doc *yaml.Node, f *file) {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	hosts := child(doc, "hosts")
	for i := range f.Hosts {
		if hosts == nil || i >= len(hosts.Content) {
			return
		}
		hn := hosts.Content[i]
		f.Hosts[i].line = hn.Line
		servers := child(child(hn, "roles"), "servers")
		for j := range f.Hosts[i].Roles.Servers {
			f.Hosts[i].Roles.Servers[j].line = hn.Line
			if servers != nil && j < len(servers.Content) {
				f.Hosts[i].Roles.Servers[j].line = servers.Content[j].Line
			}
		}
	}
}

// child is the value of key in mapping n, or nil.
func child(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
