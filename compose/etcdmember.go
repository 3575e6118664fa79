package compose

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// EtcdMemberEnv names the environment variable that points compose at a
// prebuilt etcd-member binary.
const EtcdMemberEnv = "LOCKBENCH_ETCD_MEMBER"

// etcdMemberBinary finds the etcd-member binary once per process.
var etcdMemberBinary = sync.OnceValues(findEtcdMember)

// EtcdMember returns the etcd-member binary compose runs on this machine
// (see Env.Etcd for where it is found): a static one, which a run over
// several hosts uploads to the hosts of its etcd members.
func EtcdMember() (string, error) { return etcdMemberBinary() }

// findEtcdMember returns, in this order: $LOCKBENCH_ETCD_MEMBER; an
// etcd-member next to the running executable; or etcd-member in
// <user cache dir>/lockbench, brought up to date by `go build` (which does
// nothing when it already is, so a stale binary is never used; building
// it cold takes about a minute). A file lock serialises the builds of
// concurrent test processes.
func findEtcdMember() (string, error) {
	if p := os.Getenv(EtcdMemberEnv); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("compose: $%s=%s: %w", EtcdMemberEnv, p, err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "etcd-member")
		if executable(p) == nil {
			return p, nil
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("compose: no etcd-member: set $%s: %w", EtcdMemberEnv, err)
	}
	dir := filepath.Join(cache, "lockbench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("compose: etcd-member cache dir %s: %w", dir, err)
	}
	bin := filepath.Join(dir, "etcd-member")
	unlock, err := lockFile(filepath.Join(dir, "etcd-member.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	goBin, err := exec.LookPath("go")
	if err != nil {
		if executable(bin) == nil {
			return bin, nil // no toolchain to check it with: use what there is
		}
		return "", fmt.Errorf("compose: no etcd-member in %s and no go to build it (set $%s): %w", dir, EtcdMemberEnv, err)
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/lockbench/lockbench/cmd/etcd-member")
	cmd.Dir = moduleDir()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // static, for hosts with another C library
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compose: go build etcd-member into %s: %w\n%s", bin, err, out)
	}
	return bin, nil
}

// moduleDir is the root of lockbench's source, where `go build` resolves
// the member's package; "" (the working dir) when the source is not where
// this file was compiled.
func moduleDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	root := filepath.Dir(filepath.Dir(file))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return ""
	}
	return root
}

// executable answers nil when p is a regular file someone may execute.
func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting for other processes
// that hold it, and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("compose: lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("compose: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
