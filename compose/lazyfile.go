package compose

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// lazyPage is the unit in which a lazyFile keeps unsynced data, as the
// kernel's page cache does.
const lazyPage = 4096

// A lazyFile is one file of a lazy filesystem that is open or has changes
// not yet synced: its content as its readers see it is the backing file's
// (the "disk") overlaid with the writes and truncations made since its last
// sync, which only reach the backing file when the file is synced (fsync,
// fdatasync, a write through a handle opened O_SYNC or O_DSYNC) — or never,
// if the power is lost first.
//
// It is kept by the backing file's inode number, not by the FUSE node, so
// that its changes outlive the kernel forgetting the node, and it goes when
// it is clean and no handle has it open (or when its last name is unlinked
// and its last handle closed).
type lazyFile struct {
	fs  *lazyFS
	ino uint64

	mu sync.Mutex
	// f is open read-write on the backing inode, for page fills and syncs.
	f *os.File
	// handles counts the open handles; unlinked is set once the file's
	// last name is gone.
	handles  int
	unlinked bool
	// size is the file's size as its readers see it; backing bytes at or
	// beyond valid are stale (a truncation since the last sync cut them)
	// and read as zeros. valid <= size, and valid <= the backing size.
	size, valid int64
	// pages holds the content of every page written since the last sync;
	// bytes at or beyond size are zero.
	pages map[int64][]byte
	// resized is set when size or valid differ from the backing file's.
	resized bool
	// mtime is the time of the last change the backing file lacks.
	mtime time.Time
}

// dirty reports whether the file has changes the backing file lacks.
// Callers hold mu.
func (f *lazyFile) dirty() bool { return len(f.pages) > 0 || f.resized }

// readBacking reads the backing file's bytes at off into b, up to valid,
// leaving zeros wherever the backing file is shorter.
func (f *lazyFile) readBacking(b []byte, off int64) error {
	clear(b)
	if off >= f.valid {
		return nil
	}
	b = b[:min(int64(len(b)), f.valid-off)]
	for len(b) > 0 {
		n, err := f.f.ReadAt(b, off)
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			return nil
		}
		if err != nil {
			return err
		}
		b, off = b[n:], off+int64(n)
	}
	return nil
}

// read fills buf with the file's content at off and returns how many bytes
// it has (fewer at the end of the file). Callers hold mu.
func (f *lazyFile) read(buf []byte, off int64) (int, error) {
	if off >= f.size {
		return 0, nil
	}
	n := int(min(int64(len(buf)), f.size-off))
	buf = buf[:n]
	// Runs of clean pages are read from the backing file at once.
	clean := -1 // start in buf of the current clean run
	flush := func(end int) error {
		if clean < 0 {
			return nil
		}
		err := f.readBacking(buf[clean:end], off+int64(clean))
		clean = -1
		return err
	}
	for pos := 0; pos < n; {
		idx := (off + int64(pos)) / lazyPage
		in := int((off + int64(pos)) - idx*lazyPage)
		chunk := min(lazyPage-in, n-pos)
		if p, ok := f.pages[idx]; ok {
			if err := flush(pos); err != nil {
				return 0, err
			}
			copy(buf[pos:pos+chunk], p[in:])
		} else if clean < 0 {
			clean = pos
		}
		pos += chunk
	}
	return n, flush(n)
}

// write writes data at off into the file's pages, filling each page it
// dirties from the backing file first. Callers hold mu.
func (f *lazyFile) write(data []byte, off int64) error {
	end := off + int64(len(data))
	for pos := off; pos < end; {
		idx := pos / lazyPage
		start := idx * lazyPage
		p, ok := f.pages[idx]
		if !ok {
			p = make([]byte, lazyPage)
			// A page the write covers whole needs nothing from the disk.
			if pos > start || end < start+lazyPage {
				if err := f.readBacking(p, start); err != nil {
					return err
				}
			}
			f.pages[idx] = p
			f.fs.addDirty(lazyPage)
		}
		pos += int64(copy(p[pos-start:], data[pos-off:]))
	}
	if end > f.size {
		f.size, f.resized = end, true
	}
	f.mtime = time.Now()
	return nil
}

// truncate sets the file's size, as ftruncate does: bytes beyond it are
// gone, and an extension reads as zeros. Callers hold mu.
func (f *lazyFile) truncate(size int64) {
	if size == f.size {
		return
	}
	if size < f.valid {
		f.valid = size
	}
	for idx, p := range f.pages {
		start := idx * lazyPage
		switch {
		case start >= size:
			delete(f.pages, idx)
			f.fs.addDirty(-lazyPage)
		case start+lazyPage > size:
			clear(p[size-start:])
		}
	}
	f.size, f.resized, f.mtime = size, true, time.Now()
}

// allocate does what fallocate(2) does to the file's content with mode:
// extends it (0), nothing (FALLOC_FL_KEEP_SIZE: only space), or zeroes a
// range (punching a hole, zeroing a range). Callers hold mu.
func (f *lazyFile) allocate(off, length int64, mode uint32) syscall.Errno {
	const keepSize = unix.FALLOC_FL_KEEP_SIZE
	switch mode {
	case 0:
		if off+length > f.size {
			f.size, f.resized = off+length, true
		}
		return 0
	case keepSize:
		return 0
	case unix.FALLOC_FL_PUNCH_HOLE | keepSize, unix.FALLOC_FL_ZERO_RANGE, unix.FALLOC_FL_ZERO_RANGE | keepSize:
		end := off + length
		if mode&keepSize != 0 {
			end = min(end, f.size)
		}
		zeros := make([]byte, lazyPage)
		for pos := off; pos < end; {
			n := min(end-pos, lazyPage-pos%lazyPage)
			if err := f.write(zeros[:n], pos); err != nil {
				return fs.ToErrno(err)
			}
			pos += n
		}
		return 0
	}
	return syscall.EOPNOTSUPP
}

// sync writes the file's changes to the backing file, which then holds
// what the file's readers see: this is what survives a power loss. The
// backing file is not fsynced itself: the machine under the lazy
// filesystem does not lose power. Callers hold mu.
func (f *lazyFile) sync() error {
	if !f.dirty() {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.f.Fd()), &st); err != nil {
		return err
	}
	if f.valid < st.Size {
		if err := f.f.Truncate(f.valid); err != nil {
			return err
		}
	}
	if f.size != f.valid || f.valid < st.Size {
		if err := f.f.Truncate(f.size); err != nil {
			return err
		}
	}
	idxs := make([]int64, 0, len(f.pages))
	for idx := range f.pages {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	for _, idx := range idxs {
		start := idx * lazyPage
		if _, err := f.f.WriteAt(f.pages[idx][:min(lazyPage, f.size-start)], start); err != nil {
			return err
		}
	}
	f.fs.addDirty(-int64(len(f.pages)) * lazyPage)
	clear(f.pages)
	f.valid, f.resized = f.size, false
	return nil
}

// lazyHandle is an open file of a lazy filesystem. Its data operations go
// through its lazyFile; attributes other than the size go to the backing
// file at once (metadata is durable at once on a lazy filesystem).
type lazyHandle struct {
	file *lazyFile
	// lf is the loopback handle whose descriptor the kernel's open made;
	// attribute changes and the release go through it.
	lf *fs.LoopbackFile
	// sync makes every write durable before it returns: the handle was
	// opened O_SYNC or O_DSYNC.
	sync bool
}

var (
	_ fs.FileReader    = (*lazyHandle)(nil)
	_ fs.FileWriter    = (*lazyHandle)(nil)
	_ fs.FileFsyncer   = (*lazyHandle)(nil)
	_ fs.FileFlusher   = (*lazyHandle)(nil)
	_ fs.FileReleaser  = (*lazyHandle)(nil)
	_ fs.FileGetattrer = (*lazyHandle)(nil)
	_ fs.FileSetattrer = (*lazyHandle)(nil)
	_ fs.FileLseeker   = (*lazyHandle)(nil)
	_ fs.FileAllocater = (*lazyHandle)(nil)
)

// Read reads the file's content: synced data from the disk, the rest from
// memory.
func (h *lazyHandle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f := h.file
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.read(buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

// Write keeps the data in memory until the file is synced, unless the
// handle syncs every write.
func (h *lazyHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	f := h.file
	f.mu.Lock()
	err := f.write(data, off)
	if err == nil && h.sync {
		err = f.sync()
	}
	f.mu.Unlock()
	if err != nil {
		return 0, fs.ToErrno(err)
	}
	f.fs.writeback()
	return uint32(len(data)), 0
}

// Fsync makes the file's content durable: fsync and fdatasync alike (the
// FUSE request does not say which range, so all of the file's changes go).
func (h *lazyHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	f := h.file
	f.mu.Lock()
	defer f.mu.Unlock()
	return fs.ToErrno(f.sync())
}

// Flush, sent at each close of a descriptor, makes nothing durable, as
// close(2) does not on Linux.
func (h *lazyHandle) Flush(ctx context.Context) syscall.Errno { return 0 }

// Release closes the handle; the file's unsynced changes stay in memory.
func (h *lazyHandle) Release(ctx context.Context) syscall.Errno {
	h.file.fs.release(h.file)
	return h.lf.Release(ctx)
}

// Getattr reports the backing file's attributes with the file's size as
// its readers see it.
func (h *lazyHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return h.file.stat(&out.Attr)
}

// Setattr changes the size in memory and every other attribute on the
// disk.
func (h *lazyHandle) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if size, ok := in.GetSize(); ok {
		f := h.file
		f.mu.Lock()
		f.truncate(int64(size))
		f.mu.Unlock()
		in.Valid &^= fuse.FATTR_SIZE
	}
	if errno := h.lf.Setattr(ctx, in, out); errno != 0 {
		return errno
	}
	return h.file.stat(&out.Attr)
}

// Lseek answers SEEK_DATA and SEEK_HOLE (the kernel answers the others) as
// if the file had no holes.
func (h *lazyHandle) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	f := h.file
	f.mu.Lock()
	size := uint64(f.size)
	f.mu.Unlock()
	if off >= size {
		return 0, syscall.ENXIO
	}
	switch whence {
	case unix.SEEK_DATA:
		return off, 0
	case unix.SEEK_HOLE:
		return size, 0
	}
	return 0, syscall.EINVAL
}

// Allocate applies fallocate(2) to the file's content in memory.
func (h *lazyHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	f := h.file
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.allocate(int64(off), int64(size), mode)
}

// stat fills a with the backing file's attributes and the size its
// readers see, at one moment: a sync between reading the disk's size and
// looking at the changes would report the size from before the sync, and
// the kernel would cut its mappings of the file to it (SIGBUS in a server
// that maps the file, as bbolt does).
func (f *lazyFile) stat(a *fuse.Attr) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.f.Fd()), &st); err != nil {
		return fs.ToErrno(err)
	}
	a.FromStat(&st)
	if f.dirty() {
		a.Size = uint64(f.size)
		a.Blocks = (a.Size + 511) / 512
		a.SetTimes(nil, &f.mtime, &f.mtime)
	}
	return 0
}

// reopen opens the backing file that fd names read-write, for a lazyFile
// of its own: the handle's descriptor may be write-only or read-only.
func reopen(fd int) (*os.File, error) {
	return os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDWR, 0)
}
