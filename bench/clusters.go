package bench

import (
	"net/url"
	"strings"
	"time"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/kinds"
	_ "github.com/lockbench/lockbench/kinds/all" // the runner starts every kind of server
	"github.com/lockbench/lockbench/nemesis"
	"github.com/lockbench/lockbench/results"
)

// Backend is one backend of a plan: a registered name and its params,
// written on the command line as name or name?param=value&param=value
// (for example redlock?quarantine=false).
type Backend struct {
	// Spec is the backend as written; results and reports name it so.
	Spec   string
	Name   string
	Params map[string]string
	// Descriptor is what the backend registered: everything the runner
	// knows of it.
	Descriptor backends.Descriptor
}

// ParseBackend parses a backend spec. The name must be registered.
func ParseBackend(spec string) (Backend, error) {
	name, query, _ := strings.Cut(spec, "?")
	b := Backend{Spec: spec, Name: name, Params: map[string]string{}}
	d, ok := backends.Lookup(name)
	if !ok {
		return b, configErrorf("backend %q: unknown (registered: %s)", name, strings.Join(backends.Names(), ", "))
	}
	b.Descriptor = d
	if query != "" {
		v, err := url.ParseQuery(query)
		if err != nil {
			return b, configErrorf("backend %q: params: %v", spec, err)
		}
		for k, vs := range v {
			b.Params[k] = vs[len(vs)-1]
		}
	}
	return b, nil
}

// params returns the params of a case of b whose TTL is ttl: b's own,
// and those its descriptor sets for the TTL where b sets none.
func (b Backend) params(ttl time.Duration) map[string]string {
	return b.Descriptor.ParamsFor(ttl, b.Params)
}

// Listed are the backends `lockbench backends` describes: every
// registered one, and the variants its descriptor lists (postgres's
// advisory mode, whose guarantee differs from its default's).
func Listed() []string {
	var out []string
	for _, d := range backends.Descriptors() {
		out = append(out, d.Name)
		for _, v := range d.AllVariants() {
			if v.Listed && v.Params != "" {
				out = append(out, v.Spec(d.Name))
			}
		}
	}
	return out
}

// Shape is the shape of the servers backend b runs on, for telling which
// faults apply before any server starts: what their kind offers (its
// registration in kinds), with what its servers can be started with here
// (a lazy filesystem, the clock preload, network namespaces), which a
// scenario's Needs then asks for; and, for each capability they lack,
// why, in the words of the kind or the mechanism that lacks it. A client
// that takes the clock it measures validity on adds ClientClock.
func Shape(b Backend) nemesis.Shape {
	sh := kinds.Shape(b.Descriptor.Servers)
	switch {
	case !sh.Has(nemesis.Servers):
	case b.Descriptor.ClientClock:
		sh.Caps |= nemesis.ClientClock
	default:
		sh.Why[nemesis.ClientClock] = vDSOClock
	}
	return sh
}

// vDSOClock is why a backend's client has no clock a fault can stand
// still: it is not ours to give one.
const vDSOClock = "its client reads Go's own clock, through the vDSO, which neither the clock preload nor a time namespace moves in " +
	"a running process: only a client that takes the clock it measures validity on (our Redlock) can have it stand still"

// profileFits returns why backend b's servers cannot run under the
// durability profile, or "" when they can: as their kind says
// (kinds.Kind.Unsupported); a backend without servers runs only under the
// fast one, which is no profile at all.
func profileFits(b Backend, durability string) string {
	s := b.Descriptor.Servers
	if s.Kind == backends.NoServers {
		if durability != results.DurabilityFast && durability != "" {
			return "no servers: nothing to sync"
		}
		return ""
	}
	if k, err := kinds.Lookup(s.Kind); err == nil {
		return k.Unsupported[compose.Durability(durability)]
	}
	return ""
}

// Lease is how long backend b keeps the key of a holder that went silent,
// for a lease of ttl, with the params a case of that TTL gives it (see
// backends.Descriptor.Lease). Client pauses are sized from it.
func Lease(b Backend, ttl time.Duration) time.Duration {
	return b.Descriptor.LeaseOf(ttl, b.params(ttl))
}

// KeyLife is how long backend b's keys live on its servers after the
// holder's last request, for a lease of ttl (see
// backends.Descriptor.KeyLife). Clock jumps are sized from it.
func KeyLife(b Backend, ttl time.Duration) time.Duration {
	return b.Descriptor.KeyLifeOf(ttl, b.params(ttl))
}
