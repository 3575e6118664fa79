package compose

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
		t.Setenv(EtcdMemberEnv, tc.path)
		got, err := findEtcdMember()
		switch {
		case tc.wantErr && (err == nil || !strings.Contains(err.Error(), tc.path)):
			t.Errorf("$%s=%s: got %q, %v; want an error naming the path", EtcdMemberEnv, tc.path, got, err)
		case !tc.wantErr && (err != nil || got != tc.path):
			t.Errorf("$%s=%s: got %q, %v; want the path", EtcdMemberEnv, tc.path, got, err)
		}
	}
}
