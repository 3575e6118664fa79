package backends

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/lockbench/lockbench/locker"
)

// Descriptor is everything lockbench needs to know of a backend, declared
// once by the backend's own package when it registers: how to open it,
// the servers it runs on, how long its leases and keys outlive a silent
// holder, the params a case of a given TTL sets for it, the variants worth
// listing and running, and how a user points it at servers of their own.
// Which fault classes apply to it is not its to say: its servers' kind
// (package kinds) says what they offer the faults, and why they lack the
// rest. The runner and the
// CLI read it, the nemesis through the runner (the target it is given)
// and the report through the results, so that no package outside the
// backend branches on its name: adding a backend is a package that
// registers a Descriptor, and a line in backends/all.
//
// Fault classes are the nemesis's scenario names, written here as
// strings: the registry knows no fault, and the nemesis no backend.
type Descriptor struct {
	// Name is the name the backend registers under, and the name of every
	// spec of it (name or name?param=value).
	Name string
	// Doc says in a sentence what the lock is.
	Doc string
	// Open opens a Locker from a Config.
	Open Factory
	// Servers are the servers the runner starts for the backend (the zero
	// value: none).
	Servers Servers
	// Priority lists the indices among Servers' nodes of those the backend
	// prefers, so that an injection records when it hit one.
	Priority []int
	// Control marks a backend that excludes nobody: it runs beside the
	// locks to prove that the checkers see double grants, and no
	// recommendation may pick it. The results say so of its cases.
	Control bool
	// Lease is how long the backend keeps the key of a holder that went
	// silent, for a lease of ttl under params (the case's): the TTL as the
	// backend rounds it, or a session timeout when that is longer. Client
	// pauses and fault windows are sized from it. Nil means the TTL.
	Lease func(ttl time.Duration, params map[string]string) time.Duration
	// KeyLife is how long the backend's keys live on its servers after the
	// holder's last request, for a lease of ttl under params: longer than
	// the lease for a lock that keeps its keys ahead of the leases it
	// promises. Clock jumps are sized from it. Nil means Lease.
	KeyLife func(ttl time.Duration, params map[string]string) time.Duration
	// Contract, when set, declares the lock's contract for a lease of ttl
	// under params: the fields of locker.Info the contract line is drawn
	// from (TTLResolution, DriftRate, Drift, Session), as its Lockers'
	// Info reports them. The judge and lockbench check draw the line
	// with the declaration, not with the promise each worker reports,
	// and a worker whose report differs is a finding. Nil declares none:
	// the workers' report stands, and the results say so. An error names
	// a param it cannot read.
	Contract func(ttl time.Duration, params map[string]string) (locker.Info, error)
	// CaseParams returns the params a case whose TTL is ttl sets, each
	// unless the backend's spec already does: the settings a lease length
	// depends on that are not the TTL (Redlock's max TTL, ZooKeeper's
	// session). Nil sets none.
	CaseParams func(ttl time.Duration) map[string]string
	// Admit, when set, runs once on servers the runner has just created for
	// the backend (created is true), or on the user's servers before their
	// first case (false), with their addresses and credentials (and, on the
	// user's servers, the spec's params): what must happen once where nodes
	// are created (Redlock admits brand-new nodes at once instead of
	// quarantining them; only servers known to be new may be admitted
	// although they have just started). The runner replaces servers a
	// fault restarted before the next case of such a backend.
	Admit func(cfg Config, created bool) error
	// AdmitCommand is how the CLI offers Admit to operators, as
	// `lockbench NAME COMMAND --addrs ...`; its zero value offers nothing.
	AdmitCommand AdmitCommand
	// Probe, when set, reads what one of the backend's servers holds of
	// the keys of a case: the nemesis reads it before and after a fault
	// that may lose or expire keys (a restart, a crash, a power loss, a
	// clock jump), so that what the fault did is read back from the
	// servers, not assumed. Without it such a fault's effect on the keys
	// cannot be verified.
	Probe Prober
	// ClientClock says that the backend's client measures a lease's
	// validity on Config.Clock: a fault can make that clock miss a stall
	// of the client (nemesis.ClientClock).
	ClientClock bool
	// Variants are the specs of the backend worth listing or running, in
	// the order the suites run them; `lockbench backends` lists those
	// Listed. Nil means the plain backend alone.
	Variants []Variant
	// Endpoints is how `lockbench run` points the backend at the user's
	// servers instead of starting its own.
	Endpoints Endpoints
}

// AdmitCommand is the operator's command that does what Admit does on
// servers of their own (Redlock: `lockbench redlock bootstrap`): the CLI
// gives it --addrs, the credentials and TLS flags, --force (the servers
// are new, as Admit's created) and one flag per param, and Run says what
// it did.
type AdmitCommand struct {
	// Name is the subcommand's name; "" offers no command.
	Name string
	// Short, Long and Example are its help: Long says what it checks and
	// what it refuses.
	Short, Long, Example string
	// Params maps a param the command takes (a flag --param) to its usage.
	Params map[string]string
	// Run admits cfg's servers, writing what it did to out; an error says
	// what it refused.
	Run func(ctx context.Context, cfg Config, force bool, out io.Writer) error
}

// Kind is the server software a backend's servers run, as the runner
// starts them (compose): the registry names it so that backends declare
// their servers as data, without importing compose.
type Kind string

// The kinds of servers lockbench starts.
const (
	// NoServers: the backend talks to no server (the control).
	NoServers Kind = ""
	// Redis are standalone redis-server masters, independent of each
	// other.
	Redis Kind = "redis"
	// Sentinel is a Redis master with replicas, watched by redis-sentinel
	// processes that promote a replica when the master fails.
	Sentinel Kind = "sentinel"
	// ZooKeeper is an ensemble of ZooKeeper servers.
	ZooKeeper Kind = "zookeeper"
	// Etcd is a cluster of etcd members.
	Etcd Kind = "etcd"
	// Postgres is one PostgreSQL server.
	Postgres Kind = "postgres"
)

// Servers are the servers a backend needs. Backends with equal Servers
// share them in a run (rueidislock runs on the redis backend's server, so
// both are measured on the same node).
type Servers struct {
	Kind Kind
	// Count is how many servers hold data: Redis masters, ZooKeeper or
	// etcd members, a Sentinel set's master and replicas, 1 for
	// PostgreSQL.
	Count int
	// MasterParam names the param that tells the backend the master name a
	// Sentinel set's sentinels monitor it by.
	MasterParam string
}

// String names the servers as progress lines and errors do: "redis×5".
func (s Servers) String() string {
	if s.Kind == NoServers {
		return "no servers"
	}
	return fmt.Sprintf("%s×%d", s.Kind, s.Count)
}

// Variant is one spec of a backend worth listing or running: the backend
// with params. Which suites run it, under which faults, is the case
// table's to say (package suites), not the backend's.
type Variant struct {
	// Params are the variant's params as written after the "?" of its spec
	// ("quarantine=false"); empty for the plain backend.
	Params string
	// Listed means `lockbench backends` describes it beside the plain
	// backend: its guarantee differs from the plain one's.
	Listed bool
}

// Spec is the variant's spec for backend name: name, or name?params.
func (v Variant) Spec(name string) string {
	if v.Params == "" {
		return name
	}
	return name + "?" + v.Params
}

// Endpoints is how the CLI points a backend at the user's servers: the
// flag --<Flag>-addrs, the credential flags of its Auth family, and flags
// that set its params.
type Endpoints struct {
	// Flag names the --<Flag>-addrs flag; empty means the backend takes no
	// endpoints.
	Flag string
	// Usage says which servers the addresses are, in which form.
	Usage string
	// Or names a backend whose addresses this one uses when its own flag is
	// not given (rueidislock runs on the redis backend's server).
	Or string
	// Auth is the family of credential flags the backend reads.
	Auth Auth
	// Params are flags that set a param of the backend.
	Params []ParamFlag
}

// Auth is a family of credential flags, shared by the backends that talk
// to one server software: --<Flag>-username, --<Flag>-password (default
// $LOCKBENCH_<FLAG>_PASSWORD) and, when the servers take TLS,
// --<Flag>-tls-ca, -cert, -key and -insecure. Backends of one family
// declare the same Auth (Register refuses two that differ).
type Auth struct {
	// Flag is the flags' prefix ("redis"); empty means no credentials.
	Flag string
	// Name is what the help calls the servers' software ("Redis").
	Name string
	// User describes the username ("Redis ACL user").
	User string
	// TLS, when set, describes the servers the CA verifies ("Redis
	// servers"), and turns the TLS flags on.
	TLS string
}

// ParamFlag is a CLI flag that sets a param of a backend run on the
// user's servers (--sentinel-master sets the sentinel backend's master).
type ParamFlag struct {
	Flag, Param, Usage string
}

// LeaseOf is how long backend d keeps the key of a silent holder, for a
// lease of ttl under params (see Descriptor.Lease).
func (d Descriptor) LeaseOf(ttl time.Duration, params map[string]string) time.Duration {
	if d.Lease == nil {
		return ttl
	}
	return d.Lease(ttl, params)
}

// KeyLifeOf is how long backend d's keys live after the holder's last
// request, for a lease of ttl under params (see Descriptor.KeyLife).
func (d Descriptor) KeyLifeOf(ttl time.Duration, params map[string]string) time.Duration {
	if d.KeyLife == nil {
		return d.LeaseOf(ttl, params)
	}
	return d.KeyLife(ttl, params)
}

// ParamsFor returns the params of a case of backend d whose TTL is ttl:
// the spec's params, and those CaseParams adds where the spec sets none.
// It does not change spec.
func (d Descriptor) ParamsFor(ttl time.Duration, spec map[string]string) map[string]string {
	out := make(map[string]string, len(spec))
	for k, v := range spec {
		out[k] = v
	}
	if d.CaseParams != nil {
		for k, v := range d.CaseParams(ttl) {
			if _, set := out[k]; !set {
				out[k] = v
			}
		}
	}
	return out
}

// AllVariants returns d's variants: Variants, or the plain backend when d
// declares none.
func (d Descriptor) AllVariants() []Variant {
	if d.Variants == nil {
		return []Variant{{}}
	}
	return d.Variants
}
