package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/remote"
)

// Options is what a PostgreSQL server takes beyond a compose.Spec, whose
// Nodes is 1: StartServer starts one server, without replicas.
//
// Of a Spec's mechanisms, the server takes every one. Its fast durability
// is fsync=off, synchronous_commit=off and full_page_writes=off: a commit
// is acknowledged before its WAL reaches the disk, and even before it
// leaves the server's memory (the WAL writer flushes every 200 ms), so a
// server that is killed loses the transactions of its last moments — the
// lease rows it had just granted. Periodic keeps fsync=on with
// synchronous_commit=off, so a commit returns before its WAL is flushed,
// which the WAL writer does every wal_writer_delay (200 ms; up to three of
// them pass before a commit is on disk). Durable, the default, is fsync=on
// and synchronous_commit=on: a commit returns once its WAL is fsynced,
// and a killed server recovers every transaction it acknowledged.
// FakeClock moves the clock now() reads. With Netns the server listens on
// port 5432 of its address, and an advisory lock whose holder is cut off
// (Node.CutClients) is freed only when the server's TCP keepalives give
// up on the holder's session (tcp_keepalives_idle, _interval and _count
// in Config; the system's defaults take over two hours). Placed on a host
// (On), it runs there as Programs.User, from Placement.Binary
// (the postgres program, initdb beside it), and trusts connections from
// the client hosts and the control node only.
type Options struct {
	// Config holds extra server settings (postgres -c name=value), e.g.
	// {"max_connections", "500"}.
	Config [][2]string
	// Programs are the server's programs and account on this machine;
	// a field left empty is DefaultPrograms'.
	Programs Programs
}

// Programs are what a PostgreSQL server needs on this machine.
type Programs struct {
	// User is the account a server runs as when we are root (it refuses
	// to run as root), here and on hosts.
	User string
	// BinDir is the directory of postgres and initdb; empty means
	// pg_config --bindir, else the newest /usr/lib/postgresql/*/bin.
	BinDir string
}

// The environment variables DefaultPrograms reads, one per field of
// Programs.
const (
	UserEnv   = "LOCKBENCH_POSTGRES_USER"
	BinDirEnv = "LOCKBENCH_POSTGRES_BIN_DIR"
)

// DefaultPrograms returns Debian's account (the one its postgresql
// package makes) and an empty BinDir, each replaced by its environment
// variable when that is set.
func DefaultPrograms() Programs {
	return Programs{User: cmp.Or(os.Getenv(UserEnv), "postgres"), BinDir: os.Getenv(BinDirEnv)}
}

// or fills p's empty fields in from d.
func (p Programs) or(d Programs) Programs {
	return Programs{User: cmp.Or(p.User, d.User), BinDir: cmp.Or(p.BinDir, d.BinDir)}
}

// Rules are what a PostgreSQL server accepts of a compose.Spec.
var Rules = compose.Rules{Nodes: "PostgreSQL servers", Min: 1, Max: 1, Default: 1, Durability: compose.DurabilityDurable}

// role is the database superuser initdb makes, whom the servers trust and
// URL connects as.
const role = "postgres"

// MaxConnections is the servers' max_connections: every client of the
// postgres backend's advisory mode holds a session per lock it holds or
// waits for, and a run opens up to 64 clients.
const MaxConnections = 300

// StartServer starts one PostgreSQL server (Debian's postgresql package)
// in env and waits until it accepts connections. Its cluster is made by initdb in its
// dir before the first start, with trust authentication on 127.0.0.1; the
// superuser is "postgres" and the database "postgres". The server
// listens on 127.0.0.1 only (no Unix socket) and logs to the node's log.
//
// Run as root, the server runs as Programs.User, and its dir is made under
// the system's temporary dir, owned by that user, rather than in the run
// dir, which may lie under a dir that user cannot enter; the run dir then
// holds a link to it, and Env.Close removes it.
//
// The server's children each start a session of their own, so its node
// finds them by their working dir (the data dir) to kill, pause and
// resume them with it. If our process dies, the postmaster dies of its
// parent-death signal and its children follow within moments (PostgreSQL
// has them watch their parent); only children paused at that time stay,
// stopped, until someone kills them.
//
// Restart(ctx, true) is a crash and recovery: every committed transaction
// survives under the durable profile, the last ones may not under the
// fast one, and no session survives: every advisory lock is gone.
// Restart(ctx, false) wipes the dir and starts a new, empty cluster: what a
// server that lost its disk, or a fresh server put at its address, looks
// like — every table is gone with its rows, and their counters start over.
func StartServer(ctx context.Context, env *compose.Env, s compose.Spec, o Options) (*compose.Node, error) {
	s, err := s.Resolve(Rules)
	if err != nil {
		return nil, err
	}
	progs := o.Programs.or(DefaultPrograms())
	if s.On != nil {
		return startOn(ctx, env, s, o, progs)
	}
	bin, err := binDir(progs.BinDir)
	if err != nil {
		return nil, err
	}
	account, err := accountHere(progs.User)
	if err != nil {
		return nil, err
	}
	l, err := env.LayOut(1, s.Netns, 5432)
	if err != nil {
		return nil, err
	}
	host, port := l.Hosts[0], l.Ports[0][0]
	name := env.NewNames("postgres", 1)[0]
	ns := compose.NodeSpec{
		Name: name, Port: port, Binary: filepath.Join(bin, "postgres"),
		User: account,
		// A fast shutdown: SIGTERM would wait for every client to leave.
		Term:  syscall.SIGINT,
		Ready: ready(compose.HostAddr(host, port)),
		Clock: serverTime,
	}
	l.Place(&ns, 0)
	if account != "" {
		dir, err := os.MkdirTemp("", "lockbench-"+name+"-")
		if err != nil {
			return nil, fmt.Errorf("postgres: dir of %s: %w", name, err)
		}
		ns.Dir = dir
	}
	// initdb trusts 127.0.0.1; a server started with Netns is reached
	// from this host's address in 198.18.0.0/15 (see compose's peer
	// network), a range no real network uses.
	trust := []string{"198.18.0.0/15"}
	ns.Args = args(filepath.Join(env.NodeDir(ns), "data"), host, port, s.Durability, o.Config)
	ns.Prepare = func(ctx context.Context, n *compose.Node) error {
		// Straight to the disk, past a lazy filesystem: what initdb
		// writes is on it before the server first starts anyway (see
		// Node.Start), and through FUSE its thousand files take twice as
		// long. Nothing on the filesystem has been looked at yet, so the
		// kernel has nothing cached to contradict.
		return initdb(ctx, n, filepath.Join(bin, "initdb"), n.Disk(), account, trust)
	}
	node, err := env.StartNode(ctx, s, ns)
	if err != nil {
		return nil, err
	}
	if ns.Dir != "" {
		// Where someone looking at the run dir expects the node's files.
		_ = os.Symlink(ns.Dir, filepath.Join(env.Dir, name))
	}
	return node, nil
}

// startOn starts a server placed on a host (s resolved), run as
// progs.User.
func startOn(ctx context.Context, env *compose.Env, s compose.Spec, o Options, progs Programs) (*compose.Node, error) {
	l, err := compose.LayOutOn("PostgreSQL", s.On)
	if err != nil {
		return nil, err
	}
	p := l.Places[0]
	if p.Binary == "" || !path.IsAbs(p.Binary) {
		return nil, fmt.Errorf("postgres: a PostgreSQL server placed on %s: Binary %q: want the absolute path of its postgres program (initdb "+
			"is beside it)", p.Host.Name(), p.Binary)
	}
	trust := []string{}
	for _, c := range p.Clients {
		trust = append(trust, netip.PrefixFrom(c.Addr, c.Addr.BitLen()).String())
	}
	if a, ok := controlAddr(p.Host); ok {
		trust = append(trust, netip.PrefixFrom(a, a.BitLen()).String())
	}
	if p.Proxy != nil {
		// The proxy beside it connects from the host's own address.
		trust = append(trust, netip.PrefixFrom(p.Addr, p.Addr.BitLen()).String())
	}
	host := l.Hosts[0]
	ns := compose.NodeSpec{
		Name: env.NewNames("postgres", 1)[0], Port: p.Port, Binary: p.Binary,
		User: progs.User, Term: syscall.SIGINT,
		Ready: ready(compose.HostAddr(host, p.Port)), Clock: serverTime,
		Args: args(path.Join(p.Dir, "data"), host, p.Port, s.Durability, o.Config),
	}
	l.Place(&ns, 0)
	ns.Prepare = func(ctx context.Context, n *compose.Node) error {
		// Straight to the disk, as on this machine.
		return initdb(ctx, n, path.Join(path.Dir(p.Binary), "initdb"), n.Disk(), progs.User, trust)
	}
	return env.StartNode(ctx, s, ns)
}

// controlAddr is this machine's address as host h sees it, when h knows
// it (an SSH host).
func controlAddr(h remote.Remote) (netip.Addr, bool) {
	c, ok := h.(interface{ ControlAddr() netip.Addr })
	if !ok || !c.ControlAddr().IsValid() {
		return netip.Addr{}, false
	}
	return c.ControlAddr(), true
}

// args is the command line of a server with its data in data, listening
// on host:port, syncing as d says, with extra settings.
func args(data, host string, port int, d compose.Durability, extra [][2]string) []string {
	settings := [][2]string{
		{"listen_addresses", host},
		{"unix_socket_directories", ""},
		{"max_connections", strconv.Itoa(MaxConnections)},
	}
	switch d {
	case compose.DurabilityFast:
		settings = append(settings, [2]string{"fsync", "off"}, [2]string{"synchronous_commit", "off"}, [2]string{"full_page_writes", "off"})
	case compose.DurabilityPeriodic:
		settings = append(settings, [2]string{"fsync", "on"}, [2]string{"synchronous_commit", "off"})
	default:
		settings = append(settings, [2]string{"fsync", "on"}, [2]string{"synchronous_commit", "on"})
	}
	settings = append(settings, extra...)
	args := []string{"-D", data, "-p", strconv.Itoa(port)}
	for _, kv := range settings {
		args = append(args, "-c", kv[0]+"="+kv[1])
	}
	return args
}

// Binary is the path of this machine's postgres program (initdb beside
// it), found as StartServer finds it: a run over hosts whose inventory
// names no binary assumes the same path there.
func Binary() (string, error) {
	dir, err := binDir(DefaultPrograms().BinDir)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "postgres"), nil
}

// binDir finds the directory of initdb and postgres: dir, when it is set
// (Programs.BinDir).
func binDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if pgConfig, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(pgConfig, "--bindir").Output(); err == nil {
			dir := strings.TrimSpace(string(out))
			if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
				return dir, nil
			}
		}
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(found) == 0 {
		return "", errors.New("postgres: no PostgreSQL server: neither pg_config --bindir nor /usr/lib/postgresql/*/bin has postgres (install " +
			"Debian's postgresql: make deps)")
	}
	// The newest version: sort by the number in the version directory.
	version := func(p string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(p))))
		return v
	}
	slices.SortFunc(found, func(a, b string) int { return version(a) - version(b) })
	return filepath.Dir(found[len(found)-1]), nil
}

// accountHere returns the account to run the server as on this machine:
// account (Programs.User) when we are root, "" (ourselves) otherwise.
func accountHere(account string) (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	if _, err := user.Lookup(account); err != nil {
		return "", fmt.Errorf("postgres: PostgreSQL refuses to run as root and there is no user %q to run it as: %w (Debian's postgresql "+
			"package creates it: make deps)", account, err)
	}
	return account, nil
}

// initdb makes the cluster in dir/data on n's host unless it is there, as
// account (its output in the error when it fails), trusting
// connections from the prefixes in trust besides 127.0.0.1. The dir is
// given to that account first: a restart without data has just made it
// anew.
func initdb(ctx context.Context, n *compose.Node, initdbBin, dir, account string, trust []string) error {
	var out bytes.Buffer
	err := n.Host().Run(ctx, remote.Cmd{Path: "sh", Args: []string{"-c", `set -e
[ -z "$2" ] || chown -- "$2": "$1"
chmod 700 "$1"
if [ -f "$1/data/PG_VERSION" ]; then echo kept; exit 0; fi
rm -rf -- "$1/data"`, "sh", dir, account}, Stdout: &out})
	if err != nil || strings.TrimSpace(out.String()) == "kept" {
		return err
	}
	data := path.Join(dir, "data")
	out.Reset()
	hba := make([]string, len(trust))
	for i, t := range trust {
		hba[i] = "host all all " + t + " trust"
	}
	err = n.Host().Run(ctx, remote.Cmd{
		Path: "sh", User: account, Dir: path.Dir(dir), // not on a lazy filesystem: see spawn
		Args: append([]string{"-c", `set -e
"$1" -D "$2" -U "$3" --auth=trust --encoding=UTF8 --locale=C --no-sync --no-instructions
f=$2/pg_hba.conf
shift 3
for l; do printf '%s\n' "$l" >> "$f"; done`, "sh", initdbBin, data, role}, hba...),
		Stdout: &out, Stderr: &out,
	})
	if err != nil {
		return fmt.Errorf("initdb %s on %s: %w\n%s", data, n.Host().Name(), err, out.String())
	}
	return nil
}

// ready answers nil once the server at addr accepts a connection, which it
// does once it has finished starting or recovering.
func ready(addr string) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := pgconn.Connect(ctx, URL(addr))
		if err != nil {
			return err
		}
		return c.Close(ctx)
	}
}

// serverTime reads the wall clock of the server at addr:
// clock_timestamp(), which moves within a transaction (now() is the
// transaction's start, read from the same clock).
func serverTime(ctx context.Context, addr string) (time.Time, error) {
	c, err := pgconn.Connect(ctx, URL(addr))
	if err != nil {
		return time.Time{}, err
	}
	defer c.Close(context.Background())
	res := c.ExecParams(ctx, "select (extract(epoch from clock_timestamp()) * 1e6)::bigint::text", nil, nil, nil, nil).Read()
	if res.Err != nil {
		return time.Time{}, res.Err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return time.Time{}, fmt.Errorf("clock_timestamp(): %d rows", len(res.Rows))
	}
	us, err := strconv.ParseInt(string(res.Rows[0][0]), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("clock_timestamp(): %w", err)
	}
	return time.UnixMicro(us), nil
}

// URL is the connection URL of a server StartServer started, at addr (a
// node's Addr or ServerAddr): the superuser and database initdb made, no
// TLS.
func URL(addr string) string {
	return "postgres://" + role + "@" + addr + "/postgres?sslmode=disable&connect_timeout=5"
}
