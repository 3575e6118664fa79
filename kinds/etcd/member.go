package etcd

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// MemberEnv names the environment variable that points at a prebuilt
// etcd-member binary.
const MemberEnv = "LOCKBENCH_ETCD_MEMBER"

// memberBinary finds the etcd-member binary once per process.
var memberBinary = sync.OnceValues(findMember)

// Member returns the etcd-member binary the members run on this machine
// (see StartCluster for where it is found): a static one, which a run
// over several hosts uploads to the hosts of its etcd members.
func Member() (string, error) { return memberBinary() }

// LockbenchBinaryEnv names the environment variable that points at the
// lockbench binary when the running program is not it (a test binary):
// an etcd-member next to it is found as next to lockbench.
const LockbenchBinaryEnv = "LOCKBENCH_BINARY"

// findMember returns, in this order: $LOCKBENCH_ETCD_MEMBER; an
// etcd-member next to the running executable (lockbench, as `make build`
// leaves them in bin/); or one next to $LOCKBENCH_BINARY. It builds
// nothing: without one, the error says where it looked and how to get one.
func findMember() (string, error) {
	if p := os.Getenv(MemberEnv); p != "" {
		if _, err := exec.LookPath(p); err != nil { // a path: is it an executable file
			return "", fmt.Errorf("etcd: $%s=%s: %w", MemberEnv, p, err)
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
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
		looked = append(looked, p)
	}
	return "", fmt.Errorf("etcd: no etcd-member: `make build` builds it into bin/ beside lockbench; "+
		"set $%s to it, or keep it next to the lockbench binary (looked for %s)", MemberEnv, strings.Join(looked, ", "))
}
