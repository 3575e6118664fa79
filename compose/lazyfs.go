package compose

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/lockbench/lockbench/internal/server"
)

// A lazyFS is a lazy filesystem, Jepsen's LazyFS idea in Go: a FUSE
// filesystem mounted on a node's dir that passes everything through to a
// backing dir (the node's "disk") except file data, which it keeps in
// memory, as the kernel's page cache does, until the file is synced. A
// power loss drops what it keeps; the disk keeps what was synced.
//
// What makes data durable, as on Linux: fsync(2) and fdatasync(2) of the
// file (the whole file: FUSE does not pass the range of a write made
// through an O_DSYNC handle), and every write through a handle opened
// O_SYNC or O_DSYNC. What does not: write(2), close(2) (whatever the
// filesystem: Linux's close does not flush), sync_file_range(2) (it does
// not reach FUSE, and does not flush metadata on any filesystem), sync(2)
// and syncfs(2) (they reach only virtiofs among FUSE filesystems), and
// time: nothing is written back in the background unless memory runs
// past the dirty limit (lazyDirtyLimit) or compose settles the disk (see
// Node.Writeback), where a real kernel writes dirty pages back after 30 s.
//
// Truncations and fallocate(2) are data (they change what a reader sees
// and are lost with the power). Namespace and attribute changes — create,
// mkdir, unlink, rename, link, chmod, chown, utimes — reach the disk at
// once, as if every one were journalled synchronously: kinder than ext4,
// which makes them durable at its next journal commit (5 s) or an fsync,
// so a server that forgets to fsync a directory is not caught here. A file
// created and never synced survives a power loss empty, as ext4's delayed
// allocation leaves it.
type lazyFS struct {
	backing, mnt string

	mu     sync.Mutex
	server *fuse.Server
	files  map[uint64]*lazyFile // by backing inode number

	dirty    atomic.Int64 // bytes in the files' pages
	flushing atomic.Bool
}

// lazyDirtyLimit is how many bytes of unsynced pages a lazy filesystem
// keeps before it writes every file back, as the kernel starts writeback
// past its dirty ratio: it bounds the memory a server that never syncs
// (fast profile) makes us keep.
const lazyDirtyLimit = 512 << 20

// diskOf is the disk (backing dir) of the lazy filesystem mounted on a
// node's dir.
func diskOf(dir string) string { return dir + ".disk" }

// lazyFSName marks the mounts compose makes, in /proc/self/mountinfo.
const lazyFSName = "lockbench-lazyfs"

// newLazyFS mounts a lazy filesystem on mnt, whose disk is backing; both
// are created if needed.
func newLazyFS(backing, mnt string) (*lazyFS, error) {
	if err := LazyFSAvailable(); err != nil {
		return nil, err
	}
	sweepLazyFS()
	for _, d := range []string{backing, mnt} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("compose: lazy filesystem: %w", err)
		}
	}
	l := &lazyFS{backing: backing, mnt: mnt, files: map[uint64]*lazyFile{}}
	if err := l.mount(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *lazyFS) mount() error {
	root, err := fs.NewLoopbackRoot(l.backing)
	if err != nil {
		return fmt.Errorf("compose: lazy filesystem on %s: %w", l.backing, err)
	}
	lb := root.(*fs.LoopbackNode)
	node := &lazyNode{LoopbackNode: lb, fs: l}
	lb.RootData.RootNode = node
	// Everything on the filesystem changes through the kernel (the disk
	// changes under it only by syncs, which change no content), so the
	// kernel may cache names and attributes; a power loss remounts.
	cache := time.Second
	srv, err := fs.Mount(l.mnt, node, &fs.Options{EntryTimeout: &cache, AttrTimeout: &cache, MountOptions: fuse.MountOptions{
		// A server running as another user reaches its files; the
		// kernel checks their modes as on any filesystem.
		AllowOther: true,
		Options:    []string{"default_permissions"},
		FsName:     lazyFSName + ":" + lazyOwner() + ":" + l.backing,
		Name:       lazyFSName,
		MaxWrite:   1 << 20,
		// Not DirectMount: go-fuse leaves the /dev/fuse descriptor of a
		// direct mount inheritable, and every server would hold it;
		// fusermount's is made close-on-exec.
	}})
	if err != nil {
		return fmt.Errorf("compose: mount lazy filesystem on %s: %w", l.mnt, err)
	}
	l.mu.Lock()
	l.server = srv
	l.mu.Unlock()
	return nil
}

// unmount unmounts the filesystem; the node's processes must be gone. A
// mount still busy after a few tries is aborted: every request on it then
// fails, as on a machine that lost its power.
//
// The connection is aborted first, before the unmount: a copy of the
// mount in another mount namespace keeps the connection alive after the
// unmount here, and go-fuse's Unmount waits until the connection ends
// (its readers are blocked in read(2) on /dev/fuse). Every
// unshare(CLONE_NEWNS) made while the filesystem is mounted — a simulated
// host, a test's namespace, unshare(1) — makes such a copy, private
// (this machine's / is not shared, so no unmount propagates), which lives
// as long as that namespace: a power loss stalled for as long (measured:
// 19.5 s under an `unshare -m sleep 20`; minutes on a machine where other
// tests start and keep simulated hosts). The copies left behind fail
// every request (ENOTCONN); nobody uses them.
func (l *lazyFS) unmount() error {
	l.mu.Lock()
	srv := l.server
	l.server = nil
	l.mu.Unlock()
	if srv == nil {
		return nil
	}
	_ = abortFUSE(l.mnt) // without fusectl, the unmount may wait for the copies
	if err := srv.Unmount(); err != nil {
		if aerr := abortFUSE(l.mnt); aerr != nil {
			return fmt.Errorf("compose: unmount lazy filesystem %s: %w", l.mnt, errors.Join(err, aerr))
		}
		_ = unix.Unmount(l.mnt, unix.MNT_DETACH)
		srv.Wait()
	}
	return nil
}

// abortFUSE aborts the FUSE connection of the mount at mnt, through the
// fusectl filesystem: where it is not mounted (on this machine; systemd
// mounts it), a child mounts it in a mount namespace of its own, which
// goes with it.
func abortFUSE(mnt string) error {
	var st unix.Stat_t
	if err := unix.Stat(mnt, &st); err != nil && !errors.Is(err, unix.ENOTCONN) {
		return err
	}
	conn := strconv.FormatUint(uint64(unix.Minor(st.Dev)), 10)
	err := os.WriteFile("/sys/fs/fuse/connections/"+conn+"/abort", []byte("1"), 0)
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t fusectl fusectl /sys/fs/fuse/connections && echo 1 > "/sys/fs/fuse/connections/$1/abort"`, "sh", conn).CombinedOutput()
	if err != nil {
		return fmt.Errorf("abort FUSE connection %s: %w: %s", conn, err, bytes.TrimSpace(out))
	}
	return nil
}

// Unsynced is what a lazy filesystem holds in memory only: the writes,
// truncations and allocations its servers made and did not sync. It is
// server.Unsynced, which a fault reads without importing compose.
type Unsynced = server.Unsynced

// unsynced sums what the files hold in memory.
func (l *lazyFS) unsynced() Unsynced {
	l.mu.Lock()
	defer l.mu.Unlock()
	var u Unsynced
	for _, f := range l.files {
		f.mu.Lock()
		if f.dirty() {
			u.Files++
			u.Bytes += int64(len(f.pages)) * lazyPage
		}
		f.mu.Unlock()
	}
	return u
}

// powerLoss drops every unsynced change and remounts the filesystem on
// what the disk holds (a remount also empties the kernel's caches of the
// old content). The node's processes must be gone.
func (l *lazyFS) powerLoss() (Unsynced, error) {
	if err := l.unmount(); err != nil {
		return Unsynced{}, err
	}
	lost := l.unsynced()
	l.forget()
	return lost, l.mount()
}

// forget drops every file's changes, unmounted.
func (l *lazyFS) forget() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ino, f := range l.files {
		f.f.Close()
		delete(l.files, ino)
	}
	l.dirty.Store(0)
}

// wipe empties the disk, as a node restarted without its data finds it.
func (l *lazyFS) wipe() error {
	if err := l.unmount(); err != nil {
		return err
	}
	l.forget()
	if err := os.RemoveAll(l.backing); err != nil {
		return fmt.Errorf("compose: wipe %s: %w", l.backing, err)
	}
	if err := os.MkdirAll(l.backing, 0o755); err != nil {
		return fmt.Errorf("compose: wipe %s: %w", l.backing, err)
	}
	return l.mount()
}

// close unmounts the filesystem and forgets its changes.
func (l *lazyFS) close() error {
	err := l.unmount()
	l.forget()
	return err
}

// writebackAll syncs every file, as the kernel's writeback does in time.
func (l *lazyFS) writebackAll() error {
	l.mu.Lock()
	files := make([]*lazyFile, 0, len(l.files))
	for _, f := range l.files {
		files = append(files, f)
	}
	l.mu.Unlock()
	var errs []error
	for _, f := range files {
		f.mu.Lock()
		errs = append(errs, f.sync())
		f.mu.Unlock()
	}
	l.mu.Lock()
	for _, f := range files {
		l.dropIfUnused(f)
	}
	l.mu.Unlock()
	return errors.Join(errs...)
}

// writeback writes every file back when the pages in memory pass the
// dirty limit.
func (l *lazyFS) writeback() {
	if l.dirty.Load() <= lazyDirtyLimit || !l.flushing.CompareAndSwap(false, true) {
		return
	}
	defer l.flushing.Store(false)
	_ = l.writebackAll()
}

func (l *lazyFS) addDirty(n int64) { l.dirty.Add(n) }

// file returns the lazyFile of the backing file open at fd, making one if
// there is none, with one more handle when handle is set.
func (l *lazyFS) file(fd int, handle bool) (*lazyFile, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.files[st.Ino]
	if f == nil {
		rw, err := reopen(fd)
		if err != nil {
			return nil, err
		}
		f = &lazyFile{fs: l, ino: st.Ino, f: rw, size: st.Size, valid: st.Size, pages: map[int64][]byte{}}
		l.files[st.Ino] = f
	}
	if handle {
		f.handles++
	}
	return f, nil
}

// release closes one handle of f.
func (l *lazyFS) release(f *lazyFile) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.handles--
	l.dropIfUnused(f)
}

// unlinked notes that the backing file ino lost its last name: its changes
// go with its last handle.
func (l *lazyFS) unlinked(ino uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.files[ino]; f != nil {
		f.unlinked = true
		l.dropIfUnused(f)
	}
}

// dropIfUnused forgets f when no handle has it open and it is clean or
// has no name left. Callers hold l.mu.
func (l *lazyFS) dropIfUnused(f *lazyFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handles > 0 || !f.unlinked && f.dirty() || l.files[f.ino] != f {
		return
	}
	delete(l.files, f.ino)
	l.addDirty(-int64(len(f.pages)) * lazyPage)
	clear(f.pages)
	f.f.Close()
}

// lazyFSProbe says once per process whether lazy filesystems can be
// mounted here.
var lazyFSProbe = sync.OnceValue(func() error {
	if os.Geteuid() != 0 {
		return errors.New("compose: LazyFS needs root (it mounts a FUSE filesystem that other users' servers reach)")
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("compose: LazyFS needs /dev/fuse (Debian's fuse3): %w", err)
	}
	f.Close()
	return nil
})

// LazyFSAvailable returns nil when servers can be started with LazyFS
// (and power losses injected), and otherwise why not: it needs root and
// /dev/fuse. Tests of power losses skip with this error.
func LazyFSAvailable() error { return lazyFSProbe() }

// lazyOwner names this process in its mounts' source: its pid and start
// time (which tells it from a later process with the same pid).
var lazyOwner = sync.OnceValue(func() string { return processID(os.Getpid()) })

// processID is pid and its start time, "" when there is no such process.
func processID(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// After the command name (in parentheses): state is field 3, start
	// time field 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return ""
	}
	return fmt.Sprintf("%d.%s", pid, f[19])
}

// sweepLazyFS unmounts the lazy filesystems of processes that died without
// unmounting them (killed): nobody serves them (every request fails with
// ENOTCONN). A mount's source names the process that serves it; no
// request is sent to any mount, so a live process's mount, even a paused
// one, is left alone and cannot hang the sweep.
func sweepLazyFS() {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	for line := range strings.Lines(string(b)) {
		// id parent major:minor root mountpoint options ... - fstype source ...
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+3 {
			continue
		}
		owner, ok := strings.CutPrefix(fields[sep+2], lazyFSName+":")
		if !ok {
			continue
		}
		owner, _, _ = strings.Cut(owner, ":")
		pid, _, _ := strings.Cut(owner, ".")
		if n, err := strconv.Atoi(pid); err == nil && processID(n) != owner {
			_ = unix.Unmount(unescapeMountinfo(fields[4]), unix.MNT_DETACH)
		}
	}
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a path
// in /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Disk is the node's dir as its disk holds it: beneath its lazy
// filesystem when it has one, else Dir itself. A kind's Prepare writes
// there what must be on the disk before the server first starts (a
// database cluster initdb makes), past the filesystem, before anything
// has looked at it through the mount.
func (n *Node) Disk() string {
	if n.lazy == nil {
		return n.Dir
	}
	return diskOf(n.Dir)
}
