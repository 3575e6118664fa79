//go:build go1.25

package redlock_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockbench/lockbench/backends/redlock"
	"github.com/lockbench/lockbench/locker"
)

// Redlock dials its own connections with the go-redis clients' options
// (issue 19, §4): it must honour those it reads — ClientName, TLS,
// credentials, DialTimeout, ReadTimeout — and these tests check that it
// does, on real servers.

// TestClientNameApplied: every connection Redlock opens (the pipelined
// one and the hand-off one) carries the client's ClientName.
func TestClientNameApplied(t *testing.T) {
	nodes, addrs := fresh(t, 1, redisOptions{})
	client := redis.NewClient(&redis.Options{Addr: addrs[0], ClientName: "billing-locks"})
	defer client.Close()
	other := newRedlock(t, addrs)
	rl, err := redlock.New([]*redis.Client{client})
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := other.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { // waits: its hand-off connection opens
		lease, err := rl.Acquire(ctx, "k")
		if err == nil {
			err = lease.Release(ctx)
		}
		got <- err
	}()
	await(t, 10*time.Second, "a hand-off wait", func() bool {
		list, err := direct(t, nodes[0]).ClientList(ctx).Result()
		return err == nil && strings.Contains(list, "name=billing-locks") && strings.Contains(list, "cmd=blpop")
	})
	held.Release(ctx)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	list, err := direct(t, nodes[0]).ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	named := strings.Count(list, "name=billing-locks")
	if named < 2 {
		t.Fatalf("%d connections named billing-locks, want Redlock's pipelined and hand-off connections:\n%s", named, list)
	}
}

// TestCredentialsApplied: a Redlock whose client authenticates as an ACL
// user with the permissions the package documentation lists takes locks
// (with the restart quarantine); without them it fails at once naming
// what is missing (TestMisconfigurationFailsAtOnce).
func TestCredentialsApplied(t *testing.T) {
	nodes, addrs := fresh(t, 3, redisOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		// What the documentation asks for, and nothing else.
		err := direct(t, n).Do(ctx, toAny(append([]string{"ACL", "SETUSER", "locker", "on", ">s3cret", "resetkeys", "~*", "resetchannels", "-@all"},
			strings.Fields(documentedACL)...))...).Err()
		if err != nil {
			t.Fatal(err)
		}
		if err := direct(t, n).Do(ctx, "CONFIG", "SET", "requirepass", "admin").Err(); err != nil {
			t.Fatal(err)
		}
		clients[i] = redis.NewClient(&redis.Options{Addr: addrs[i], Username: "locker", Password: "s3cret", ClientName: "locks"})
	}
	defer closeClients(clients)
	rl, err := redlock.New(clients, redlock.WithFencing(true))
	if err != nil {
		t.Fatal(err)
	}
	defer rl.Close()
	lease, err := rl.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire as an ACL user with the documented permissions: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// documentedACL is the ACL the package documentation asks for (with a
// ClientName, without WithWait and databases).
const documentedACL = "+evalsha +script|load +blpop +hget +hsetnx +info +get +set +del +exists +pttl +pexpire +incr +time " +
	"+hset +hdel +hmget +hrandfield +zadd +zrange +zrem +zscore +rpush +ltrim +client|setname"

// TestTimeoutsApplied: the client's DialTimeout bounds a dial to a hung
// node, and its ReadTimeout, when shorter than Redlock's own second,
// bounds how long a connection may leave a request unanswered before it
// is given up (both reported in the log).
func TestTimeoutsApplied(t *testing.T) {
	const dialTimeout, readTimeout = 300 * time.Millisecond, 200 * time.Millisecond
	nodes, addrs := fresh(t, 3, redisOptions{})
	hung := canonical(nodes)[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newWithLog := func() (*redlock.Redlock, *logs) {
		clients := newClients(addrs, func(o *redis.Options) { o.DialTimeout, o.ReadTimeout = dialTimeout, readTimeout })
		log := &logs{}
		return redlockOver(t, clients, redlock.WithLogger(slog.New(log))), log
	}
	// ReadTimeout: a connection up, then its server hangs.
	rl, log := newWithLog()
	if lease, err := rl.Acquire(ctx, "warm"); err != nil {
		t.Fatal(err)
	} else {
		lease.Release(ctx)
	}
	// Release returns once a majority confirmed: the hung node's reply may
	// still be on its way, and a request pending since the release (which
	// may wait a second) would set the connection's read deadline, not the
	// Acquire's below. Pause only once that node has done the release.
	direct := redis.NewClient(&redis.Options{Addr: hung.Addr()})
	defer direct.Close()
	await(t, 10*time.Second, "the release done on the node about to hang", func() bool {
		n, err := direct.Exists(ctx, "warm").Result()
		return err == nil && n == 0
	})
	if err := hung.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hung.Resume() })
	paused := time.Now()
	// An Acquire, whose requests wait 20 ms (its node timeout), and no
	// Release (whose requests may wait a second) until the check.
	lease, err := rl.Acquire(ctx, "k", locker.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	await(t, 10*time.Second, "the hung connection given up", func() bool { _, ok := log.find("unreachable", hung.Addr()); return ok })
	lease.Release(ctx)
	r, _ := log.find("unreachable", hung.Addr())
	t.Logf("hung connection given up %v after the pause: %s", r.Time.Sub(paused).Round(time.Millisecond), r.Message)
	// The request's deadline (20 ms) plus the ReadTimeout: under the
	// second of Redlock's own bound.
	if took := r.Time.Sub(paused); took >= time.Second {
		t.Errorf("the hung connection was given up %v after the pause; the ReadTimeout is %v", took, readTimeout)
	}
	// DialTimeout: a new Redlock dials the hung node.
	start := time.Now()
	_, log = newWithLog()
	await(t, 10*time.Second, "the dial to the hung node given up", func() bool { _, ok := log.find("unreachable", hung.Addr()); return ok })
	r, _ = log.find("unreachable", hung.Addr())
	took := r.Time.Sub(start)
	t.Logf("dial to the hung node given up after %v", took.Round(time.Millisecond))
	if took < dialTimeout || took > 5*dialTimeout {
		t.Errorf("the dial to a hung node was given up after %v; the DialTimeout is %v", took, dialTimeout)
	}
}

// TestTLSApplied: a Redlock over TLS nodes (redis-server's own TLS) takes
// locks with the client's TLSConfig, and one that does not trust the
// nodes' certificate fails at once with ErrConfig.
func TestTLSApplied(t *testing.T) {
	dir := t.TempDir()
	ca, caPEM := newCA(t)
	certFile, keyFile := newServerCert(t, dir, ca)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tlsAddrs []string
	for range 3 {
		port := freeTLSPort(t)
		_, err := forTest(t).Redis(ctx, 1, redisOptions{Config: [][]string{
			{"tls-port", strconv.Itoa(port)}, {"tls-cert-file", certFile}, {"tls-key-file", keyFile},
			{"tls-ca-cert-file", caFile}, {"tls-auth-clients", "no"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		tlsAddrs = append(tlsAddrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	open := func(cfg *tls.Config) *redlock.Redlock {
		return redlockOver(t, newClients(tlsAddrs, func(o *redis.Options) { o.TLSConfig = cfg }))
	}
	trusted := open(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err := trusted.Bootstrap(ctx, redlock.Force()); err != nil {
		t.Fatalf("Bootstrap over TLS: %v", err)
	}
	lease, err := trusted.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire over TLS: %v", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = open(&tls.Config{MinVersion: tls.VersionTLS12}).Acquire(ctx, "k") // the system's roots: not our CA
	if !errors.Is(err, redlock.ErrConfig) || time.Since(start) > 5*time.Second {
		t.Fatalf("Acquire with a CA that does not sign the nodes' certificate = %v after %v, want ErrConfig at once", err, time.Since(start))
	}
	t.Log(err)
}

// freeTLSPort returns a port nothing listens on, for a TLS port that
// compose does not allocate.
func freeTLSPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func newCA(t *testing.T) (*tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newServerCert(t *testing.T, dir string, ca *tls.Certificate) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
