package compose

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// LockbenchBinaryEnv names the environment variable that points at the
// lockbench binary when the running program is not it (a test binary):
// an etcd-member next to it is found as next to lockbench.
const LockbenchBinaryEnv = "LOCKBENCH_BINARY"

// findEtcdMember returns, in this order: $LOCKBENCH_ETCD_MEMBER; an
// etcd-member next to the running executable (lockbench, as `make build`
// leaves them in bin/); or one next to $LOCKBENCH_BINARY. It builds
// nothing: without one, the error says where it looked and how to get one.
func findEtcdMember() (string, error) {
	if p := os.Getenv(EtcdMemberEnv); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("compose: $%s=%s: %w", EtcdMemberEnv, p, err)
		}
		return p, nil
	}
	var looked []string
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	if p := os.Getenv(LockbenchBinaryEnv); p != "" {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, "etcd-member")
		if executable(p) == nil {
			return p, nil
		}
		looked = append(looked, p)
	}
	return "", fmt.Errorf("compose: no etcd-member: `make build` builds it into bin/ beside lockbench; "+
		"set $%s to it, or keep it next to the lockbench binary (looked for %s)", EtcdMemberEnv, strings.Join(looked, ", "))
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
