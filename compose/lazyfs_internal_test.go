package compose

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// mountLazy mounts a lazy filesystem in a temporary dir for one test.
func mountLazy(t *testing.T) *lazyFS {
	t.Helper()
	if err := LazyFSAvailable(); err != nil {
		t.Skip(err)
	}
	// The filesystem's server goroutines end with its unmount.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // first registered, so it runs last
	dir := t.TempDir()
	l, err := newLazyFS(filepath.Join(dir, "disk"), filepath.Join(dir, "mnt"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// fileOp is one step on a file of the lazy filesystem.
type fileOp func(t *testing.T, f *os.File)

func write(b string, off int64) fileOp {
	return func(t *testing.T, f *os.File) {
		if _, err := f.WriteAt([]byte(b), off); err != nil {
			t.Fatal(err)
		}
	}
}

func truncate(size int64) fileOp {
	return func(t *testing.T, f *os.File) {
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
	}
}

func fsync(t *testing.T, f *os.File) {
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func fdatasync(t *testing.T, f *os.File) {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		t.Fatal(err)
	}
}

func fallocate(mode uint32, off, n int64) fileOp {
	return func(t *testing.T, f *os.File) {
		if err := unix.Fallocate(int(f.Fd()), mode, off, n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLazyFSPowerLoss checks what a power loss keeps of a file: what was
// synced, as the file read then, and nothing written after.
func TestLazyFSPowerLoss(t *testing.T) {
	big := string(bytes.Repeat([]byte("x"), 3*lazyPage+100))
	for _, tc := range []struct {
		name string
		// flags opens the file (O_CREAT|O_RDWR are added).
		flags int
		ops   []fileOp
		// before is the content read before the power loss, after the
		// content after it.
		before, after string
	}{
		{name: "unsynced write is lost", ops: []fileOp{write("hello", 0)}, before: "hello", after: ""},
		{name: "fsync keeps", ops: []fileOp{write("hello", 0), fsync}, before: "hello", after: "hello"},
		{name: "fdatasync keeps", ops: []fileOp{write("hello", 0), fdatasync}, before: "hello", after: "hello"},
		{name: "write after fsync is lost", ops: []fileOp{write("hello", 0), fsync, write("HE", 0), write(" world", 5)}, before: "HEllo world", after: "hello"},
		{name: "O_DSYNC write keeps", flags: unix.O_DSYNC, ops: []fileOp{write("hello", 0)}, before: "hello", after: "hello"},
		{name: "O_SYNC write keeps", flags: unix.O_SYNC, ops: []fileOp{write("hello", 0)}, before: "hello", after: "hello"},
		{name: "unsynced truncate is lost", ops: []fileOp{write("hello", 0), fsync, truncate(2)}, before: "he", after: "hello"},
		{name: "truncate then extend reads zeros", ops: []fileOp{write("hello", 0), fsync, truncate(2), truncate(4), fsync}, before: "he\x00\x00", after: "he\x00\x00"},
		{name: "write beyond a truncation", ops: []fileOp{write("hello world", 0), fsync, truncate(3), write("X", 6)}, before: "hel\x00\x00\x00X", after: "hello world"},
		{name: "pages across a sync", ops: []fileOp{write(big, 0), fsync, write("y", lazyPage), truncate(lazyPage + 1)}, before: big[:lazyPage] + "y", after: big},
		{name: "fallocate extends with zeros", ops: []fileOp{write("ab", 0), fallocate(0, 0, 6), fsync}, before: "ab\x00\x00\x00\x00", after: "ab\x00\x00\x00\x00"},
		{name: "punch a hole", ops: []fileOp{write("abcdef", 0), fsync, fallocate(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 1, 2)}, before: "a\x00\x00def", after: "abcdef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mountLazy(t)
			p := filepath.Join(l.mnt, "f")
			f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|tc.flags, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range tc.ops {
				op(t, f)
			}
			checkContent(t, p, tc.before, "before the power loss")
			if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(tc.before)) {
				t.Errorf("fstat before the power loss: size %d, %v; want %d", fi.Size(), err, len(tc.before))
			}
			f.Close()
			if _, err := l.powerLoss(); err != nil {
				t.Fatal(err)
			}
			checkContent(t, p, tc.after, "after the power loss")
			if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(tc.after)) {
				t.Errorf("stat after the power loss: %v, %v; want size %d", fi, err, len(tc.after))
			}
		})
	}
}

func checkContent(t *testing.T, p, want, when string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if string(got) != want {
		t.Errorf("%s: content %q, want %q", when, trim(got), trim([]byte(want)))
	}
}

func trim(b []byte) string {
	if len(b) > 40 {
		return string(b[:20]) + "…" + string(b[len(b)-20:])
	}
	return string(b)
}

// TestLazyFSUnsyncedCount checks that Unsynced counts what a power loss
// drops, and that a file renamed or unlinked keeps or loses its changes
// as its inode does.
func TestLazyFSUnsyncedCount(t *testing.T) {
	l := mountLazy(t)
	a, b := filepath.Join(l.mnt, "a"), filepath.Join(l.mnt, "b")
	if err := os.WriteFile(a, []byte("aaaa"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("bb"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := l.unsynced(); u.Files != 2 || u.Bytes != 2*lazyPage {
		t.Fatalf("unsynced after two writes: %+v; want 2 files, 2 pages", u)
	}
	// Renamed over b: b's changes go with its inode, a's follow a.
	if err := os.Rename(a, b); err != nil {
		t.Fatal(err)
	}
	checkContent(t, b, "aaaa", "after the rename")
	// b's old inode loses its changes with its last handle, which the
	// kernel releases after WriteFile's close has returned.
	awaitUnsynced(t, l, "a rename over a file", func(u Unsynced) bool { return u.Files == 1 })
	if err := l.writebackAll(); err != nil {
		t.Fatal(err)
	}
	if u := l.unsynced(); u != (Unsynced{}) {
		t.Fatalf("unsynced after writeback: %+v; want none", u)
	}
	// An unlinked file that is still open keeps its content for its
	// reader, and loses it with its last handle.
	f, err := os.OpenFile(b, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("BB"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := f.ReadAt(got, 0); err != nil || string(got) != "BBaa" {
		t.Fatalf("read of an unlinked open file: %q, %v; want BBaa", got, err)
	}
	f.Close()
	awaitUnsynced(t, l, "the last handle of an unlinked file closed", func(u Unsynced) bool { return u == Unsynced{} })
	lost, err := l.powerLoss()
	if err != nil || lost != (Unsynced{}) {
		t.Fatalf("power loss: lost %+v, %v; want nothing", lost, err)
	}
	if _, err := os.Stat(b); !os.IsNotExist(err) {
		t.Fatalf("stat of the unlinked file after the power loss: %v; want not exist (names are durable at once)", err)
	}
}

// awaitUnsynced waits up to 10 s for l's unsynced changes to satisfy ok
// after what: the kernel releases a file's handle after close returns, so
// what a handle kept alive goes a moment later.
func awaitUnsynced(t *testing.T, l *lazyFS, what string, ok func(Unsynced) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for u := l.unsynced(); !ok(u); u = l.unsynced() {
		if time.Now().After(deadline) {
			t.Fatalf("unsynced 10s after %s: %+v", what, u)
		}
		time.Sleep(time.Millisecond)
	}
}
