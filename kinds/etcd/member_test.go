package etcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindEtcdMemberFromEnv(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	exe := filepath.Join(dir, "etcd-member")
	for p, mode := range map[string]os.FileMode{plain: 0o644, exe: 0o755} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		path    string
		wantErr bool
	}{
		{filepath.Join(dir, "missing"), true},
		{plain, true},
		{dir, true},
		{exe, false},
	} {
		t.Setenv(MemberEnv, tc.path)
		got, err := findMember()
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), tc.path)):
			t.Errorf("$%s=%s: got %q, %v; want an error naming the path", MemberEnv, tc.path, got, err)
		case !tc.wantErr && (err != nil || got != tc.path):
			t.Errorf("$%s=%s: got %q, %v; want the path", MemberEnv, tc.path, got, err)
		}
	}
}

// TestFindEtcdMemberBuildsNothing: without $LOCKBENCH_ETCD_MEMBER the
// member is found next to the lockbench binary ($LOCKBENCH_BINARY here,
// where the running program is a test), and without one there the error
// names both places and how to build it, rather than running go build.
func TestFindEtcdMemberBuildsNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(MemberEnv, "")
	t.Setenv(LockbenchBinaryEnv, filepath.Join(dir, "lockbench"))
	_, err := findMember()
	if err == nil || !strings.Contains(err.Error(), MemberEnv) || !strings.Contains(err.Error(), filepath.Join(dir, "etcd-member")) ||
		!strings.Contains(err.Error(), "make build") {
		t.Fatalf("no member anywhere: %v; want an error naming $%s, %s and make build", err, MemberEnv, dir)
	}
	member := filepath.Join(dir, "etcd-member")
	if err := os.WriteFile(member, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findMember(); err != nil || got != member {
		t.Fatalf("member next to lockbench: %q, %v; want %s", got, err, member)
	}
}
