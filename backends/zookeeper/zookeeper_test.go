package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockbench/lockbench/backends"
	"github.com/lockbench/lockbench/backends/backendstest"
	"github.com/lockbench/lockbench/locker"
	"github.com/lockbench/lockbench/locker/locktest"
)

func TestOpenRejectsBadConfig(t *testing.T) {
	addr := []string{"127.0.0.1:2181"}
	backendstest.RefusesBadConfigs(t, "zookeeper", []backendstest.BadConfig{
		{Name: "no address", Config: backends.Config{}, Want: "need at least 1"},
		{Name: "empty address", Config: backends.Config{Addrs: []string{""}}, Want: "empty"},
		{Name: "unknown param", Config: backends.Config{Addrs: addr, Params: map[string]string{"sesion": "4s"}}, Want: "sesion"},
		{Name: "bad session", Config: backends.Config{Addrs: addr, Params: map[string]string{"session": "four"}}, Want: `session="four"`},
		{Name: "tiny session", Config: backends.Config{Addrs: addr, Params: map[string]string{"session": "1ms"}}, Want: "session=1ms"},
		{Name: "relative root", Config: backends.Config{Addrs: addr, Params: map[string]string{"root": "locks"}}, Want: `root="locks"`},
		{Name: "root /", Config: backends.Config{Addrs: addr, Params: map[string]string{"root": "/"}}, Want: `root="/"`},
		{Name: "root with ..", Config: backends.Config{Addrs: addr, Params: map[string]string{"root": "/a/../b"}}, Want: `".."`},
		{Name: "root with //", Config: backends.Config{Addrs: addr, Params: map[string]string{"root": "/a//b"}}, Want: `root="/a//b"`},
		{Name: "user without password", Config: backends.Config{Addrs: addr, Username: "bob"}, Want: `"bob"`},
		{Name: "password without user", Config: backends.Config{Addrs: addr, Password: "pw"}, Want: "password of 2 bytes"},
		{Name: "user with colon", Config: backends.Config{Addrs: addr, Username: "a:b", Password: "pw"}, Want: `"a:b"`},
	})
}

func TestEscape(t *testing.T) {
	for key, want := range map[string]string{
		"orders:42":       "orders:42",
		"a/b":             "a%2Fb",
		"100%":            "100%25",
		".":               "%2E",
		"..":              "%2E%2E",
		"a.b":             "a.b",
		"tab\there":       "tab%09here",
		"clé":             "cl%C3%A9",
		"zk-lock-0000001": "zk-lock-0000001",
	} {
		if got := escape(key); got != want {
			t.Errorf("escape(%q) = %q, want %q", key, got, want)
		}
	}
	seen := map[string]string{}
	for _, key := range []string{"a/b", "a%2Fb", "a%252Fb", ".", "%2E", "..", "...", "a b", "a+b"} {
		name := escape(key)
		if other, dup := seen[name]; dup {
			t.Errorf("keys %q and %q both escape to %q", key, other, name)
		}
		seen[name] = key
	}
}

func TestParseSeq(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    int64
		wantErr bool
	}{
		{name: "_c_0123456789abcdef0123456789abcdef-lock-0000000042", want: 42},
		{name: "lock-0000000000", want: 0},
		{name: "/x/lock-y/lock-2147483647", want: 2147483647},
		{name: "_c_00-lock--2147483648", want: -2147483648}, // wrapped: refused by attempt
		{name: "lock-" + strings.Repeat("9", 12), wantErr: true},
		{name: "nolock", wantErr: true},
	} {
		got, err := parseSeq(tc.name)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseSeq(%q) = %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestDigestAuth checks that Username and Password authenticate with the
// digest scheme and protect the znodes: lockers with the credentials
// exclude each other, a client without them can neither take the key nor
// steal it.
func TestDigestAuth(t *testing.T) {
	addrs := standalone(t)
	root := fmt.Sprintf("/lockbench/digest-%d", time.Now().UnixNano())
	cfg := backends.Config{Addrs: addrs, Username: "alice", Password: "s3cret", Params: map[string]string{"root": root}}
	openCfg := func(cfg backends.Config) locker.Locker {
		l, err := backends.Open("zookeeper", cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := openCfg(cfg), openCfg(cfg)
	lease := locktest.MustAcquire(t, a, "k", locker.WithTTL(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.TryAcquire(ctx, "k"); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("TryAcquire by another authenticated client = %v, want ErrNotAcquired", err)
	}

	anon := cfg
	anon.Username, anon.Password = "", ""
	if _, err := openCfg(anon).TryAcquire(ctx, "k"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("TryAcquire without credentials = %v, want zk.ErrNoAuth", err)
	}
	wrong := cfg
	wrong.Password = "guess"
	if _, err := openCfg(wrong).TryAcquire(ctx, "k"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("TryAcquire with a wrong password = %v, want zk.ErrNoAuth", err)
	}
	raw := rawConn(t, addrs)
	if _, _, err := raw.Children(root + "/k"); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("listing the key's queue without credentials = %v, want zk.ErrNoAuth", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	again := locktest.MustAcquire(t, b, "k", locker.WithTTL(time.Minute))
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestExcludesZkLock checks the claim that our znodes and zk.Lock's form
// one queue when both use the same parent path.
func TestExcludesZkLock(t *testing.T) {
	addrs := standalone(t)
	l := openClosed(t, addrs, nil)
	key := fmt.Sprintf("interop-%d", time.Now().UnixNano())
	theirs := zk.NewLock(rawConn(t, addrs), DefaultRoot+"/"+escape(key), zk.WorldACL(zk.PermAll))
	if err := theirs.Lock(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.TryAcquire(ctx, key); !errors.Is(err, locker.ErrNotAcquired) {
		t.Fatalf("TryAcquire while zk.Lock holds the key = %v, want ErrNotAcquired", err)
	}
	if err := theirs.Unlock(); err != nil {
		t.Fatal(err)
	}
	ours := locktest.MustAcquire(t, l, key, locker.WithTTL(time.Minute))
	locked := make(chan error, 1)
	go func() { locked <- theirs.Lock() }()
	select {
	case err := <-locked:
		t.Fatalf("zk.Lock took the key while we held it (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := ours.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("zk.Lock after our Release: %v", err)
	}
	if err := theirs.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestTransient: the connection's errors, go-zookeeper's or the socket's
// own, are retried; the server's answers and our own refusals are not.
func TestTransient(t *testing.T) {
	reset := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.ECONNRESET)}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{zk.ErrConnectionClosed, true},
		{zk.ErrNoServer, true},
		{&locker.NodeError{Node: "127.0.0.1:2181", Err: reset}, true},
		{fmt.Errorf("create: %w", io.EOF), true},
		{zk.ErrNoNode, false},
		{zk.ErrNodeExists, false},
		{locker.ErrInvalid, false},
		{errors.New("something else"), false},
	} {
		if got := transient(tc.err); got != tc.want {
			t.Errorf("transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
