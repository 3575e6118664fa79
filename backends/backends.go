// Package backends is the registry of lock backends: each backend package
// registers, in an init function, one Descriptor — its factory and what
// lockbench must know to run it (its servers, how its leases are sized,
// its variants, its CLI endpoints) — as go-ycsb's databases register their creators. The
// runner, the nemesis and the CLI open backends by name with a Config and
// read their descriptors. Import github.com/lockbench/lockbench/backends/all
// to register every backend.
package backends

import (
	"crypto/tls"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Config is how a backend is reached and tuned. Addrs, credentials and TLS
// are common to all backends; Params carries the backend's own settings
// (for example "fencing" or "quarantine" for redlock), each documented by
// its backend.
type Config struct {
	// Addrs are the node addresses (host:port), or URLs where a backend
	// says so.
	Addrs []string `json:"addrs,omitempty"`
	// Username and Password authenticate to the servers (Redis ACL/AUTH,
	// etcd users, ZooKeeper digest), where the backend supports it.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// TLS, when set, is used for every connection to the servers.
	TLS *tls.Config `json:"-"`
	// TLSFiles, when set and TLS is not, is loaded into TLS by Open: the
	// form in which a Config travels to a worker process.
	TLSFiles *TLSFiles `json:"tls_files,omitempty"`
	// Params are backend-specific settings by name.
	Params map[string]string `json:"params,omitempty"`
	// Clock, when set, is the clock the backend's client measures a
	// lease's validity on, where its descriptor says it takes one
	// (Descriptor.ClientClock); nil is time.Now. A worker sets it to a
	// clock a fault can make miss a stall.
	Clock func() time.Time `json:"-"`
}

// Factory opens a Locker from a Config.
type Factory func(Config) (locker.Locker, error)

var (
	mu       sync.RWMutex
	registry = map[string]Descriptor{}
)

// Register makes a backend available under d.Name. It is meant to be
// called from the backend package's init function, and panics if the
// name is empty or taken, the factory is nil, or d's credential family
// differs from another backend's of the same flag, since those are
// programming errors.
func Register(d Descriptor) {
	mu.Lock()
	defer mu.Unlock()
	if d.Name == "" || d.Open == nil {
		panic("backends: Register needs a name and a factory")
	}
	if _, dup := registry[d.Name]; dup {
		panic("backends: Register called twice for " + d.Name)
	}
	if a := d.Endpoints.Auth; a.Flag != "" {
		for _, o := range registry {
			if o.Endpoints.Auth.Flag == a.Flag && o.Endpoints.Auth != a {
				panic(fmt.Sprintf("backends: %s and %s declare different credential flags --%s-*", d.Name, o.Name, a.Flag))
			}
		}
	}
	registry[d.Name] = d
}

// Lookup returns the descriptor of the backend registered under name.
func Lookup(name string) (Descriptor, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := registry[name]
	return d, ok
}

// Descriptors returns every registered backend's descriptor, by name.
func Descriptors() []Descriptor {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Descriptor, 0, len(registry))
	for _, d := range registry {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Open opens the backend registered under name.
func Open(name string, cfg Config) (locker.Locker, error) {
	d, ok := Lookup(name)
	if !ok {
		return nil, locker.Invalidf("unknown backend %q (registered: %s)", name, strings.Join(Names(), ", "))
	}
	if cfg.TLS == nil && cfg.TLSFiles != nil {
		c, err := cfg.TLSFiles.Load()
		if err != nil {
			return nil, fmt.Errorf("open %s: TLS: %w", name, err)
		}
		cfg.TLS = c
	}
	l, err := d.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return l, nil
}

// Names lists the registered backends in alphabetical order.
func Names() []string {
	var names []string
	for _, d := range Descriptors() {
		names = append(names, d.Name)
	}
	return names
}

// Check returns an error wrapping locker.ErrInvalid naming every param of
// c that is not in known, so that a typo does not silently fall back to a
// default.
func (c Config) Check(known ...string) error {
	var unknown []string
	for k := range c.Params {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return locker.Invalidf("unknown param(s) %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return nil
}

// String returns param name, or def when it is not set.
func (c Config) String(name, def string) string {
	if v, ok := c.Params[name]; ok {
		return v
	}
	return def
}

// Bool returns param name parsed as a boolean, or def when it is not set.
func (c Config) Bool(name string, def bool) (bool, error) {
	v, ok := c.Params[name]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, locker.Invalidf("param %s=%q: not a boolean", name, v)
	}
	return b, nil
}

// Int returns param name parsed as an integer, or def when it is not set.
func (c Config) Int(name string, def int) (int, error) {
	v, ok := c.Params[name]
	if !ok {
		return def, nil
	}
	i, err := strconv.Atoi(v)
	if err != nil {
		return 0, locker.Invalidf("param %s=%q: not an integer", name, v)
	}
	return i, nil
}

// Duration returns param name parsed by time.ParseDuration, or def when it
// is not set.
func (c Config) Duration(name string, def time.Duration) (time.Duration, error) {
	v, ok := c.Params[name]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, locker.Invalidf("param %s=%q: not a duration", name, v)
	}
	return d, nil
}

// NeedAddrs returns an error wrapping locker.ErrInvalid unless c has at
// least n addresses, none of them empty.
func (c Config) NeedAddrs(n int) error {
	if len(c.Addrs) < n {
		return locker.Invalidf("%d address(es) %q: need at least %d", len(c.Addrs), c.Addrs, n)
	}
	for i, a := range c.Addrs {
		if strings.TrimSpace(a) == "" {
			return locker.Invalidf("address %d of %q is empty", i, c.Addrs)
		}
	}
	return nil
}
