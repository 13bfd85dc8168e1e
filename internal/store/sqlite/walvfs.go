package sqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// The writer's WAL writes are coalesced: one write(2) per commit instead
// of two per page.
//
// SQLite appends a commit to the WAL as one 24-byte frame header and one
// page per changed page, each its own write, and then fsyncs (wal.c,
// walWriteOneFrame). A recorded boundary changes about 12 pages, so it
// made 24 write calls. On the disk hxd was measured on, those calls cost
// about as much as the fsync after them: writing 48 KB as 24 frame-shaped
// writes and then fdatasync took 310–390 µs, as one write 200–240 µs,
// against about 200 µs for one 4 KB write.
//
// The shim is a VFS over SQLite's default ("unix") VFS that changes one
// thing for WAL files: writes that continue the previous one are gathered
// in a buffer, and the buffer goes out in one write when the commit
// frame's page has been appended (a frame header whose "database size
// after commit" field is non-zero marks the commit frame), or before any
// other use of the file: a write elsewhere, a read, a sync, a truncate, a
// size query, a file control or the close. So every byte reaches the file
// in the order SQLite wrote it, before the fsync that makes the commit
// durable and before the commit is published in the wal-index, where
// readers find it. Should a commit frame ever go unrecognised, the sync
// that synchronous=FULL does at every commit flushes the buffer all the
// same, still before the wal-index update. A failed flush fails the call
// that caused it with the write's error, so the transaction fails as if
// its own write had.
//
// Everything else — the database file, locking, shared memory, the
// checkpointer's and readers' connections — goes through the unix VFS
// unchanged: the shim's open calls the unix open with the unix VFS, so
// the files it opens share the unix VFS's lock bookkeeping with every
// other connection of the process.
//
// A transaction that spills pages into the WAL before it commits and then
// rolls back leaves its frames in the buffer, never flushed: SQLite's
// rollback in WAL mode does not touch the WAL file. Flushed later, those
// frames would land where another connection (another Store or process on
// the file) has meanwhile written committed frames, and corrupt them. So
// the shim also wraps the database file's shared-memory lock: when a
// connection releases the WAL write lock, whatever its WAL buffer still
// holds belongs to a transaction that did not commit (a commit flushes at
// its commit frame, before the release) and is dropped, as SQLite drops
// those frames itself.
//
// If the shim cannot be registered, writerDSN leaves it out and the
// writer uses the unix VFS directly.

// walVFSName is the name the shim is registered under; "" when it is not.
var walVFSName = "hxd-wal"

// walMaxBuffer bounds a WAL file's buffer; a transaction writing more
// (a big import) flushes on the way.
const walMaxBuffer = 4 << 20

// walMaxWrite is the most one unix write may carry: the unix VFS keeps
// only the low 17 bits of a write's length (os_unix.c, seekAndWriteFd),
// as SQLite never writes more than a page at once.
const walMaxWrite = 0x1ffff &^ 0xfff

// WAL layout (https://www.sqlite.org/fileformat.html#walformat).
const (
	walFileHeaderSize  = 32
	walFrameHeaderSize = 24
)

var (
	// shimVFS and shimIO are handed to SQLite by address: package
	// variables, so they never move. Their function fields hold
	// top-level Go functions, as modernc's own VFSes do.
	shimVFS sqlite3.Tsqlite3_vfs
	shimIO  sqlite3.Tsqlite3_io_methods

	// unixVFS is the default VFS the shim forwards to.
	unixVFS uintptr

	// shimDBIO is the io_methods of database files opened through the
	// shim: the unix ones with the shared-memory lock wrapped.
	shimDBIO sqlite3.Tsqlite3_io_methods

	// walMu guards walFiles, walByConn and the one-time set-up of shimIO
	// and shimDBIO.
	walMu sync.Mutex
	// walFiles holds the buffer of every open WAL file, by sqlite3_file.
	walFiles = map[uintptr]*walFile{}
	// walByConn holds the WAL buffer of each connection, by its TLS:
	// modernc gives every connection a TLS of its own, with which SQLite
	// opens the connection's database and WAL files and calls their
	// methods.
	walByConn = map[*libc.TLS]*walFile{}
	// unixDBIO is the io_methods of the unix VFS's database files that
	// shimDBIO was copied from (0 until the first one opens), and
	// unixShmLock its xShmLock.
	unixDBIO    uintptr
	unixShmLock uintptr
	// unixIO is the io_methods of the unix VFS's WAL files that shimIO
	// was copied from (0 until the first WAL file opens), and unixCalls
	// its methods the shim replaces.
	unixIO    uintptr
	unixCalls struct {
		close, read, write, truncate, sync, fileSize, fileControl uintptr
	}

	// walWrites counts the writes the shim makes to WAL files (tests).
	walWrites atomic.Int64
	// walDropped counts buffers of uncommitted transactions dropped (tests).
	walDropped atomic.Int64

	// walVFSErr is why the shim could not be registered (Open logs it).
	walVFSErr error

	// walFaults holds, by WAL file path, the result code every write to
	// that file returns instead of writing (tests: SQLITE_FULL is what the
	// unix VFS returns for ENOSPC); walFaultsSet counts its entries, so
	// that writes look it up only while one is set.
	walFaults    sync.Map // string → int32
	walFaultsSet atomic.Int32
)

func init() {
	if walVFSErr = registerWALVFS(); walVFSErr != nil {
		walVFSName = ""
	}
}

// registerWALVFS registers shimVFS, a copy of the default VFS whose open
// wraps WAL files.
func registerWALVFS() error {
	tls := libc.NewTLS()
	defer tls.Close()
	unixVFS = sqlite3.Xsqlite3_vfs_find(tls, 0)
	if unixVFS == 0 {
		return errors.New("no default VFS")
	}
	name, err := libc.CString(walVFSName) // lives as long as the process
	if err != nil {
		return err
	}
	shimVFS = *(*sqlite3.Tsqlite3_vfs)(ptr(unixVFS))
	shimVFS.FpNext = 0
	shimVFS.FzName = name
	*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&shimVFS.FxOpen)) = walOpen
	if rc := sqlite3.Xsqlite3_vfs_register(tls, uintptr(unsafe.Pointer(&shimVFS)), 0); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("register VFS %s: SQLite error %d", walVFSName, rc)
	}
	return nil
}

// walFile is the write buffer of one open WAL file. SQLite uses a file
// from one connection at a time, so it needs no lock of its own.
type walFile struct {
	conn *libc.TLS // the connection's, the key of walByConn
	path string    // the WAL file's path (walFaults)
	buf  uintptr   // sqlite3_malloc64 memory, cap bytes
	cap  int
	n    int   // bytes buffered
	off  int64 // file offset of buf[0]
	page bool  // the next write is the commit frame's page
}

// walOpen is the shim's xOpen: the unix open, then, for a WAL file, the
// shim's io methods in place of the unix ones.
func walOpen(tls *libc.TLS, pVfs, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	rc := (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{(*sqlite3.Tsqlite3_vfs)(ptr(unixVFS)).FxOpen})))(tls, unixVFS, zName, pFile, flags, pOutFlags)
	if rc != sqlite3.SQLITE_OK {
		return rc
	}
	if flags&sqlite3.SQLITE_OPEN_MAIN_DB != 0 {
		wrapDBFile(pFile)
		return rc
	}
	if flags&sqlite3.SQLITE_OPEN_WAL == 0 {
		return rc
	}
	file := (*sqlite3.Tsqlite3_file)(ptr(pFile))
	walMu.Lock()
	defer walMu.Unlock()
	if unixIO == 0 && file.FpMethods != 0 {
		unixIO = file.FpMethods
		m := (*sqlite3.Tsqlite3_io_methods)(ptr(unixIO))
		unixCalls.close, unixCalls.read, unixCalls.write = m.FxClose, m.FxRead, m.FxWrite
		unixCalls.truncate, unixCalls.sync, unixCalls.fileSize = m.FxTruncate, m.FxSync, m.FxFileSize
		unixCalls.fileControl = m.FxFileControl
		shimIO = *m
		*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&shimIO.FxClose)) = walClose
		*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&shimIO.FxRead)) = walRead
		*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&shimIO.FxWrite)) = walWrite
		*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&shimIO.FxTruncate)) = walTruncate
		*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&shimIO.FxSync)) = walSync
		*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&shimIO.FxFileSize)) = walFileSize
		*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&shimIO.FxFileControl)) = walFileControl
	}
	if file.FpMethods == 0 || file.FpMethods != unixIO {
		return rc // not the io methods the shim knows: left alone
	}
	w := &walFile{conn: tls, path: libc.GoString(zName)}
	walFiles[pFile] = w
	walByConn[tls] = w
	file.FpMethods = uintptr(unsafe.Pointer(&shimIO))
	return rc
}

// wrapDBFile gives a database file just opened the shim's io methods
// (the unix ones with dbShmLock), when they are the unix ones the shim
// knows and have an xShmLock.
func wrapDBFile(pFile uintptr) {
	file := (*sqlite3.Tsqlite3_file)(ptr(pFile))
	walMu.Lock()
	defer walMu.Unlock()
	if unixDBIO == 0 && file.FpMethods != 0 {
		m := (*sqlite3.Tsqlite3_io_methods)(ptr(file.FpMethods))
		if m.FiVersion < 2 || m.FxShmLock == 0 {
			return
		}
		unixDBIO, unixShmLock = file.FpMethods, m.FxShmLock
		shimDBIO = *m
		*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&shimDBIO.FxShmLock)) = dbShmLock
	}
	if file.FpMethods == 0 || file.FpMethods != unixDBIO {
		return // not the io methods the shim knows: left alone
	}
	file.FpMethods = uintptr(unsafe.Pointer(&shimDBIO))
}

// walWriteLock is the WAL write lock's slot in the shared memory
// (wal.c, WAL_WRITE_LOCK).
const walWriteLock = 0

// dbShmLock is the shim's xShmLock of database files: the unix one, and,
// when the connection gives up the WAL write lock, the connection's WAL
// buffer dropped first (what is left in it was written by a transaction
// that did not commit; see the package comment above).
func dbShmLock(tls *libc.TLS, pFile uintptr, offset, n, flags int32) int32 {
	if offset == walWriteLock && flags == sqlite3.SQLITE_SHM_UNLOCK|sqlite3.SQLITE_SHM_EXCLUSIVE {
		walMu.Lock()
		w := walByConn[tls]
		walMu.Unlock()
		if w != nil && w.n > 0 {
			walDropped.Add(1)
			w.n = 0
		}
	}
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&struct{ uintptr }{unixShmLock})))(tls, pFile, offset, n, flags)
}

// ptr turns an address SQLite handed over into a pointer: SQLite's
// memory comes from modernc's allocator, outside the Go heap, so it
// neither moves nor is collected.
func ptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// walLookup returns pFile's buffer.
func walLookup(pFile uintptr) *walFile {
	walMu.Lock()
	w := walFiles[pFile]
	walMu.Unlock()
	return w
}

// unixWrite writes n bytes at buf to pFile at off through the unix VFS.
func unixWrite(tls *libc.TLS, pFile, buf uintptr, n int32, off int64) int32 {
	walWrites.Add(1)
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&struct{ uintptr }{unixCalls.write})))(tls, pFile, buf, n, off)
}

// fault returns the result code set for w's file in walFaults, or
// SQLITE_OK.
func (w *walFile) fault() int32 {
	if walFaultsSet.Load() == 0 {
		return sqlite3.SQLITE_OK
	}
	if rc, ok := walFaults.Load(w.path); ok {
		return rc.(int32)
	}
	return sqlite3.SQLITE_OK
}

// flush writes w's buffer to pFile, in pieces of at most walMaxWrite.
func (w *walFile) flush(tls *libc.TLS, pFile uintptr) int32 {
	n := w.n
	w.n = 0
	if rc := w.fault(); rc != sqlite3.SQLITE_OK && n > 0 {
		return rc
	}
	for done := 0; done < n; {
		k := min(n-done, walMaxWrite)
		if rc := unixWrite(tls, pFile, w.buf+uintptr(done), int32(k), w.off+int64(done)); rc != sqlite3.SQLITE_OK {
			return rc
		}
		done += k
	}
	return sqlite3.SQLITE_OK
}

// reserve makes room for n more bytes; false when memory ran out.
func (w *walFile) reserve(tls *libc.TLS, n int) bool {
	if w.n+n <= w.cap {
		return true
	}
	c := min(max(2*w.cap, w.n+n, 64<<10), walMaxBuffer)
	p := sqlite3.Xsqlite3_realloc64(tls, w.buf, uint64(c))
	if p == 0 {
		return false
	}
	w.buf, w.cap = p, c
	return true
}

// release frees w's memory.
func (w *walFile) release(tls *libc.TLS) {
	if w.buf != 0 {
		sqlite3.Xsqlite3_free(tls, w.buf)
	}
	w.buf, w.cap, w.n = 0, 0, 0
}

func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	w := walLookup(pFile)
	if w == nil {
		return unixWrite(tls, pFile, zBuf, iAmt, iOfst)
	}
	if rc := w.fault(); rc != sqlite3.SQLITE_OK {
		return rc
	}
	if w.n > 0 && iOfst != w.off+int64(w.n) {
		if rc := w.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	src := unsafe.Slice((*byte)(ptr(zBuf)), iAmt)
	commitPage := w.page
	w.page = iAmt == walFrameHeaderSize && iOfst >= walFileHeaderSize && binary.BigEndian.Uint32(src[4:8]) != 0
	if w.n+int(iAmt) > walMaxBuffer || !w.reserve(tls, int(iAmt)) {
		if rc := w.flush(tls, pFile); rc != sqlite3.SQLITE_OK {
			return rc
		}
		return unixWrite(tls, pFile, zBuf, iAmt, iOfst)
	}
	if w.n == 0 {
		w.off = iOfst
	}
	copy(unsafe.Slice((*byte)(ptr(w.buf+uintptr(w.n))), iAmt), src)
	w.n += int(iAmt)
	if commitPage {
		return w.flush(tls, pFile)
	}
	return sqlite3.SQLITE_OK
}

// flushed flushes pFile's buffer before another use of the file.
func flushed(tls *libc.TLS, pFile uintptr) int32 {
	if w := walLookup(pFile); w != nil {
		return w.flush(tls, pFile)
	}
	return sqlite3.SQLITE_OK
}

func walRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	if rc := flushed(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&struct{ uintptr }{unixCalls.read})))(tls, pFile, zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	if rc := flushed(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&struct{ uintptr }{unixCalls.truncate})))(tls, pFile, size)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	if rc := flushed(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&struct{ uintptr }{unixCalls.sync})))(tls, pFile, flags)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	if rc := flushed(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{unixCalls.fileSize})))(tls, pFile, pSize)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	if rc := flushed(tls, pFile); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{unixCalls.fileControl})))(tls, pFile, op, pArg)
}

func walClose(tls *libc.TLS, pFile uintptr) int32 {
	walMu.Lock()
	w := walFiles[pFile]
	delete(walFiles, pFile)
	if w != nil && walByConn[w.conn] == w {
		delete(walByConn, w.conn)
	}
	walMu.Unlock()
	rc := int32(sqlite3.SQLITE_OK)
	if w != nil {
		rc = w.flush(tls, pFile)
		w.release(tls)
	}
	if crc := (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{unixCalls.close})))(tls, pFile); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	return rc
}
