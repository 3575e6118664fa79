package compose

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// lazyNode is a file or directory of a lazy filesystem: the loopback's,
// with data operations going through lazyFiles.
type lazyNode struct {
	*fs.LoopbackNode
	fs *lazyFS
}

var (
	_ fs.NodeWrapChilder    = (*lazyNode)(nil)
	_ fs.NodeOpener         = (*lazyNode)(nil)
	_ fs.NodeCreater        = (*lazyNode)(nil)
	_ fs.NodeGetattrer      = (*lazyNode)(nil)
	_ fs.NodeSetattrer      = (*lazyNode)(nil)
	_ fs.NodeUnlinker       = (*lazyNode)(nil)
	_ fs.NodeRenamer        = (*lazyNode)(nil)
	_ fs.NodeTmpfiler       = (*lazyNode)(nil)
	_ fs.NodeCopyFileRanger = (*lazyNode)(nil)
	_ fs.NodeLookuper       = (*lazyNode)(nil)
	_ fs.NodeLinker         = (*lazyNode)(nil)
)

// WrapChild makes every node of the filesystem a lazyNode.
func (n *lazyNode) WrapChild(ctx context.Context, ops fs.InodeEmbedder) fs.InodeEmbedder {
	return &lazyNode{LoopbackNode: ops.(*fs.LoopbackNode), fs: n.fs}
}

// backingPath is the path of the node (or of name in it) on the disk.
func (n *lazyNode) backingPath(name ...string) string {
	return filepath.Join(append([]string{n.fs.backing, n.EmbeddedInode().Path(nil)}, name...)...)
}

// handle wraps the loopback's handle of a file just opened.
func (n *lazyNode) handle(fh fs.FileHandle, flags uint32, trunc bool) (fs.FileHandle, syscall.Errno) {
	lf, ok := fh.(*fs.LoopbackFile)
	fd, fdOK := 0, false
	if ok {
		fd, fdOK = lf.PassthroughFd()
	}
	if !fdOK {
		if r, ok := fh.(fs.FileReleaser); ok {
			r.Release(context.Background())
		}
		return nil, syscall.EIO
	}
	f, err := n.fs.file(fd, true)
	if err != nil {
		lf.Release(context.Background())
		return nil, fs.ToErrno(err)
	}
	if trunc {
		f.mu.Lock()
		f.truncate(0)
		f.mu.Unlock()
	}
	return &lazyHandle{file: f, lf: lf, sync: flags&syscall.O_DSYNC != 0}, 0
}

// Open opens the backing file; a truncation it asks for (O_TRUNC) is made
// in memory.
func (n *lazyNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags&^syscall.O_TRUNC)
	if errno != 0 {
		return nil, 0, errno
	}
	h, errno := n.handle(fh, flags, flags&syscall.O_TRUNC != 0)
	return h, fuseFlags, errno
}

// Create creates the file on the disk at once (the name is durable, its
// data is not).
func (n *lazyNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32,
	syscall.Errno) {
	ch, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags&^syscall.O_TRUNC, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	h, errno := n.handle(fh, flags, flags&syscall.O_TRUNC != 0)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	if errno := h.(*lazyHandle).file.stat(&out.Attr); errno != 0 {
		return nil, nil, 0, errno
	}
	return ch, h, fuseFlags, 0
}

// Lookup reports the file's size as its readers see it: the kernel sets
// its idea of a file's size from every lookup (and every READDIRPLUS
// entry), and a size from the disk alone would cut the file's unsynced
// tail out of the mappings of the server that wrote it (SIGBUS).
func (n *lazyNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Lookup(ctx, name, out)
	if errno != 0 {
		return nil, errno
	}
	return ch, n.fs.patch(&out.Attr)
}

// Link reports the linked file's size as its readers see it (see Lookup).
func (n *lazyNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ch, errno := n.LoopbackNode.Link(ctx, target, name, out)
	if errno != 0 {
		return nil, errno
	}
	return ch, n.fs.patch(&out.Attr)
}

// patch replaces attributes read from the disk by those of the file at
// one moment, if it has a lazyFile.
func (l *lazyFS) patch(a *fuse.Attr) syscall.Errno {
	l.mu.Lock()
	f := l.files[a.Ino]
	l.mu.Unlock()
	if f == nil {
		return 0
	}
	return f.stat(a)
}

// Getattr reports the file's size as its readers see it.
func (n *lazyNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*lazyHandle); ok {
		return h.Getattr(ctx, out)
	}
	if errno := n.LoopbackNode.Getattr(ctx, nil, out); errno != 0 {
		return errno
	}
	return n.fs.patch(&out.Attr)
}

// Setattr truncates in memory (truncate(2) by name, or through a handle)
// and changes every other attribute on the disk.
func (n *lazyNode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*lazyHandle); ok {
		return h.Setattr(ctx, in, out)
	}
	var f *lazyFile
	if size, ok := in.GetSize(); ok {
		disk, err := os.OpenFile(n.backingPath(), os.O_RDWR, 0)
		if err != nil {
			return fs.ToErrno(err)
		}
		f, err = n.fs.file(int(disk.Fd()), false)
		disk.Close()
		if err != nil {
			return fs.ToErrno(err)
		}
		f.mu.Lock()
		f.truncate(int64(size))
		f.mu.Unlock()
		in.Valid &^= fuse.FATTR_SIZE
	}
	if errno := n.LoopbackNode.Setattr(ctx, nil, in, out); errno != 0 {
		return errno
	}
	if f != nil {
		return f.stat(&out.Attr)
	}
	return 0
}

// Unlink removes the name on the disk; a file that had no other name
// takes its unsynced changes with its last handle.
func (n *lazyNode) Unlink(ctx context.Context, name string) syscall.Errno {
	gone := n.lastName(name)
	if errno := n.LoopbackNode.Unlink(ctx, name); errno != 0 {
		return errno
	}
	if gone != 0 {
		n.fs.unlinked(gone)
	}
	return 0
}

// Rename renames on the disk at once; a file it replaces goes as with
// Unlink.
func (n *lazyNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	var gone uint64
	if p, ok := newParent.(*lazyNode); ok && flags&unix.RENAME_EXCHANGE == 0 {
		gone = p.lastName(newName)
	}
	if errno := n.LoopbackNode.Rename(ctx, name, newParent, newName, flags); errno != 0 {
		return errno
	}
	if gone != 0 {
		n.fs.unlinked(gone)
	}
	return 0
}

// lastName returns the backing inode number of the regular file at name
// if that is its only name, else 0.
func (n *lazyNode) lastName(name string) uint64 {
	var st unix.Stat_t
	if err := unix.Lstat(n.backingPath(name), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return 0
	}
	return st.Ino
}

// Tmpfile refuses O_TMPFILE, whose file would bypass the lazy data path;
// programs fall back to a named file.
func (n *lazyNode) Tmpfile(ctx context.Context, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

// CopyFileRange refuses, so that the kernel copies through Read and Write.
func (n *lazyNode) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut,
	length, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.EOPNOTSUPP
}
