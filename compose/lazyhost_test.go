package compose_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockbench/lockbench/compose"
	"github.com/lockbench/lockbench/compose/composetest"
)

// TestLazyFSMainArgs: every bad command line of the lazyfs command is
// refused with an error naming what is wrong.
func TestLazyFSMainArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "want --backing, --mount and --control"},
		{[]string{"--backing", "/a", "--mount", "/b"}, "want --backing, --mount and --control"},
		{[]string{"--backing", "/a", "--mount", "/b", "--control", "/c", "extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "bogus"},
		{[]string{"ctl"}, "want a request"},
		{[]string{"ctl", "explode", "--control", "/c"}, `request "explode"`},
		{[]string{"ctl", "drop"}, "want --control SOCKET"},
		{[]string{"ctl", "drop", "--control", "/c", "more"}, "want --control SOCKET"},
	} {
		err := compose.LazyFSMain(context.Background(), tc.args, new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("lazyfs %q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// TestLazyFSDaemon drives a lazyfs daemon on this machine through its
// control socket, as the control node drives one on a host: a file
// written and not synced is what it reports and what a drop drops (the
// file survives empty), and an unmount ends the daemon with nothing left
// mounted.
func TestLazyFSDaemon(t *testing.T) {
	composetest.StartsServers(t)
	composetest.NeedsLazyFS(t)
	ctx := composetest.Context(t)
	dir := t.TempDir()
	mnt, sock := filepath.Join(dir, "m"), filepath.Join(dir, "ctl.sock")
	served := make(chan error, 1)
	go func() {
		served <- compose.LazyFSMain(ctx, []string{"--backing", mnt + ".disk", "--mount", mnt, "--control", sock}, new(bytes.Buffer))
	}()
	ctl := func(op string) compose.Unsynced {
		t.Helper()
		var out bytes.Buffer
		if err := compose.LazyFSMain(ctx, []string{"ctl", op, "--control", sock}, &out); err != nil {
			t.Fatalf("ctl %s: %v", op, err)
		}
		var u struct{ Files, Bytes int64 }
		if err := json.Unmarshal(out.Bytes(), &u); err != nil {
			t.Fatalf("ctl %s answered %q: %v", op, out.String(), err)
		}
		return compose.Unsynced{Files: int(u.Files), Bytes: u.Bytes}
	}
	for { // the socket exists once the filesystem is mounted
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case err := <-served:
			t.Fatalf("the daemon ended before it listened: %v", err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("unsynced"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := ctl("unsynced"); u.Files != 1 || u.Bytes == 0 {
		t.Errorf("unsynced: %+v, want 1 file's page", u)
	}
	if u := ctl("drop"); u.Files != 1 || u.Bytes == 0 {
		t.Errorf("drop dropped %+v, want 1 file's page", u)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil || len(b) != 0 {
		t.Errorf("after the drop the file reads %q (%v), want it empty", b, err)
	}
	ctl("unmount")
	if err := <-served; err != nil {
		t.Errorf("the daemon ended with %v", err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || bytes.Contains(mounts, []byte(mnt)) {
		t.Errorf("%s still mounted (%v)", mnt, err)
	}
}
