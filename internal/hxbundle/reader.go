package hxbundle

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"math/big"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding/charmap"
)

// The archive reader. Opening follows CPython 3.11's zipfile (the
// reference's reader): end-of-central-directory search, optional ZIP64
// records, central directory entries with their names decoded as UTF-8
// (flag bit 11) or CP437, so that the reference's checks see the same
// entries and names. Reading a member follows ZipFile.open/ZipExtFile and
// adds the checks of DESIGN §8 that a conforming writer always passes:
//
//   - a NUL byte in an entry name (Python truncates the name at it);
//   - end of central directory fields zipfile ignores: disk numbers other
//     than 0, entry counts that differ from the directory, a comment
//     length that goes beyond the end of the file (bytes after the
//     comment are a canonical-archive check, canonical.go);
//   - the local header must agree with the central directory on the name
//     (raw bytes), the method, the flag bits 0, 3 and 11, and, without a
//     data descriptor, CRC-32 and sizes (Python compares only the name);
//   - the entry's data (and data descriptor) must lie inside the file,
//     before the next entry's header and the central directory, and no two
//     entries may share a header;
//   - a STORED entry must have equal compressed and uncompressed sizes;
//   - a data descriptor (flag bit 3) must follow the data and repeat the
//     central directory's CRC-32 and sizes;
//   - DEFLATE data must end exactly at the declared compressed size and
//     inflate to exactly the declared uncompressed size (Python stops at
//     the declared size and ignores the rest).
//
// Every failure of these is "(BadZipFile)". CRC-32 is checked on every
// member as it is read (Python does too). Nothing is extracted: members
// are streamed from the io.ReaderAt.

const (
	sigLocal      = 0x04034b50
	sigCentral    = 0x02014b50
	sigEnd        = 0x06054b50
	sigEnd64Loc   = 0x07064b50
	sigEnd64      = 0x06064b50
	sigDescriptor = 0x08074b50

	sizeEnd       = 22
	sizeEnd64Loc  = 20
	sizeEnd64     = 56
	sizeCentral   = 46
	sizeLocal     = 30
	maxExtractVer = 63 // zipfile.MAX_EXTRACT_VERSION

	methodStored   = 0
	methodDeflated = 8

	flagEncrypted  = 0x1
	flagDescriptor = 0x8
	flagPatched    = 0x20
	flagStrongEnc  = 0x40
	flagUTF8       = 0x800
)

// zipEntry is one central directory entry.
type zipEntry struct {
	// name is the entry name as zipfile decodes it (CP437 or UTF-8).
	name    string
	rawName []byte
	hasNUL  bool
	flags   uint16
	method  uint16
	crc     uint32
	csize   uint64
	usize   uint64
	// offset is the local header offset, adjusted like zipfile does for
	// data prepended to the archive; it may be negative or huge.
	offset  int64
	badOff  bool // offset does not fit an int64
	extAttr uint32
	// end is where the entry must end: the next header or the central
	// directory (zipfile's _end_offset).
	end int64
	// shared: another entry has the same header offset.
	shared bool
}

// zipArchive is an opened archive.
type zipArchive struct {
	r    io.ReaderAt
	size int64
	// entries are the first entries of the central directory, in order
	// (at most the keep limit given to openZip); count is all of them.
	entries  []zipEntry
	count    int
	startDir int64
	// end is the end record; offsetCD its central directory offset as
	// written (startDir when nothing was prepended).
	end      *endRecord
	offsetCD uint64
}

// zipError is a failure while opening or reading the archive.
func zipError(class, why string) *failure {
	return &failure{msg: generic(class), detail: Detail{Message: why}}
}

func badZip(format string, args ...any) *failure {
	return zipError(pyBadZipFile, fmt.Sprintf(format, args...))
}

// readAt reads len(b) bytes at off; a short read is io.ErrUnexpectedEOF.
func readAt(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// ioFailure maps a read error: a short read of the declared size is a
// damaged archive, anything else the reference's OSError.
func ioFailure(err error, what string) *failure {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return badZip("%s: unexpected end of file", what)
	}
	return zipError(pyOSError, what+": read error")
}

// endRecord is the end of central directory record, with zipfile's
// extra items.
type endRecord struct {
	zip64    bool
	sizeCD   uint64
	offsetCD uint64
	location int64 // offset of the (32-bit) end record
	// hxd's stricter checks: disk numbers, entry counts, comment length.
	disk, diskCD            uint64
	entriesDisk, entriesAll uint64
	commentLen              int64
	// The ZIP64 end record's location, its declared size (excluding the
	// leading 12 bytes) and the offset its locator gives (canonical.go).
	end64At, end64Size, end64Declared uint64
}

// findEnd is zipfile._EndRecData and _EndRecData64.
func findEnd(r io.ReaderAt, size int64) (*endRecord, *failure) {
	if size < sizeEnd {
		return nil, badZip("file is not a zip file: too short")
	}
	tail := make([]byte, sizeEnd)
	if err := readAt(r, tail, size-sizeEnd); err != nil {
		return nil, ioFailure(err, "end of central directory")
	}
	if binary.LittleEndian.Uint32(tail) == sigEnd && tail[20] == 0 && tail[21] == 0 {
		return end64(r, parseEnd(tail, size-sizeEnd))
	}
	// A comment follows: search the last 64 KiB for the signature.
	start := max(size-(1<<16)-sizeEnd, 0)
	data := make([]byte, size-start)
	if err := readAt(r, data, start); err != nil {
		return nil, ioFailure(err, "end of central directory")
	}
	k := bytes.LastIndex(data, []byte{0x50, 0x4b, 0x05, 0x06})
	if k < 0 || len(data)-k < sizeEnd {
		return nil, badZip("file is not a zip file: no end of central directory")
	}
	return end64(r, parseEnd(data[k:k+sizeEnd], start+int64(k)))
}

func parseEnd(b []byte, location int64) *endRecord {
	return &endRecord{
		disk:        uint64(binary.LittleEndian.Uint16(b[4:])),
		diskCD:      uint64(binary.LittleEndian.Uint16(b[6:])),
		entriesDisk: uint64(binary.LittleEndian.Uint16(b[8:])),
		entriesAll:  uint64(binary.LittleEndian.Uint16(b[10:])),
		sizeCD:      uint64(binary.LittleEndian.Uint32(b[12:])),
		offsetCD:    uint64(binary.LittleEndian.Uint32(b[16:])),
		commentLen:  int64(binary.LittleEndian.Uint16(b[20:])),
		location:    location,
	}
}

// end64 reads the ZIP64 locator and end record that zipfile expects right
// before the end record, if present.
func end64(r io.ReaderAt, e *endRecord) (*endRecord, *failure) {
	locAt := e.location - sizeEnd64Loc
	if locAt < 0 {
		return e, nil
	}
	loc := make([]byte, sizeEnd64Loc)
	if err := readAt(r, loc, locAt); err != nil {
		return e, nil
	}
	if binary.LittleEndian.Uint32(loc) != sigEnd64Loc {
		return e, nil
	}
	if binary.LittleEndian.Uint32(loc[4:]) != 0 || binary.LittleEndian.Uint32(loc[16:]) > 1 {
		return nil, badZip("zipfiles that span multiple disks are not supported")
	}
	recAt := locAt - sizeEnd64
	if recAt < 0 {
		return nil, badZip("file is not a zip file: bad ZIP64 locator")
	}
	rec := make([]byte, sizeEnd64)
	if err := readAt(r, rec, recAt); err != nil {
		return e, nil
	}
	if binary.LittleEndian.Uint32(rec) != sigEnd64 {
		return e, nil
	}
	e.zip64 = true
	e.end64At = uint64(recAt)
	e.end64Size = binary.LittleEndian.Uint64(rec[4:])
	e.end64Declared = binary.LittleEndian.Uint64(loc[8:])
	e.disk = uint64(binary.LittleEndian.Uint32(rec[16:]))
	e.diskCD = uint64(binary.LittleEndian.Uint32(rec[20:]))
	e.entriesDisk = binary.LittleEndian.Uint64(rec[24:])
	e.entriesAll = binary.LittleEndian.Uint64(rec[32:])
	e.sizeCD = binary.LittleEndian.Uint64(rec[40:])
	e.offsetCD = binary.LittleEndian.Uint64(rec[48:])
	return e, nil
}

// openZip is ZipFile(path) (zipfile._RealGetContents): it parses the whole
// central directory and keeps its first keep entries.
func openZip(r io.ReaderAt, size int64, keep int) (*zipArchive, *failure) {
	e, f := findEnd(r, size)
	if f != nil {
		return nil, f
	}
	// start_dir = offset_cd + concat = location - size_cd [- ZIP64 records].
	startDir := e.location
	if e.zip64 {
		startDir -= sizeEnd64 + sizeEnd64Loc
	}
	if e.sizeCD > uint64(startDir) || startDir < 0 {
		return nil, badZip("bad offset for central directory")
	}
	startDir -= int64(e.sizeCD)
	// concat: bytes prepended to the archive, added to every header offset.
	// (Python integers: offsets are unsigned 64-bit, concat may be negative.)
	concat := new(big.Int).Sub(big.NewInt(startDir), new(big.Int).SetUint64(e.offsetCD))

	z := &zipArchive{r: r, size: size, startDir: startDir, end: e, offsetCD: e.offsetCD}
	avail := max(min(int64(e.sizeCD), size-startDir), 0)
	br := bufio.NewReaderSize(io.NewSectionReader(r, startDir, avail), int(min(max(avail, 16), 64<<10)))
	var hdr [sizeCentral]byte
	for total := uint64(0); total < e.sizeCD; {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, badZip("truncated central directory")
			}
			return nil, ioFailure(err, "central directory")
		}
		if binary.LittleEndian.Uint32(hdr[:]) != sigCentral {
			return nil, badZip("bad magic number for central directory")
		}
		nameLen := int(binary.LittleEndian.Uint16(hdr[28:]))
		extraLen := int(binary.LittleEndian.Uint16(hdr[30:]))
		commentLen := int(binary.LittleEndian.Uint16(hdr[32:]))
		rest := make([]byte, nameLen+extraLen+commentLen)
		if _, err := io.ReadFull(br, rest); err != nil {
			// zipfile reads short names silently; hxd is stricter.
			return nil, badZip("truncated central directory entry")
		}
		ent := zipEntry{
			rawName: rest[:nameLen:nameLen],
			flags:   binary.LittleEndian.Uint16(hdr[8:]),
			method:  binary.LittleEndian.Uint16(hdr[10:]),
			crc:     binary.LittleEndian.Uint32(hdr[16:]),
			csize:   uint64(binary.LittleEndian.Uint32(hdr[20:])),
			usize:   uint64(binary.LittleEndian.Uint32(hdr[24:])),
			extAttr: binary.LittleEndian.Uint32(hdr[38:]),
		}
		name, ok := decodeName(ent.rawName, ent.flags)
		if !ok {
			return nil, &failure{msg: generic(pyUnicodeDecodeError),
				detail: Detail{Message: "central directory entry name is not valid UTF-8"}}
		}
		if k := strings.IndexByte(name, 0); k >= 0 {
			ent.hasNUL = true
		}
		ent.name = name
		if hdr[6] > maxExtractVer {
			return nil, &failure{msg: generic(pyNotImplementedError),
				detail: Detail{Member: printableName(name), Message: fmt.Sprintf("zip version %d.%d needed", hdr[6]/10, hdr[6]%10)}}
		}
		rawOffset := uint64(binary.LittleEndian.Uint32(hdr[42:]))
		if f := decodeExtra(&ent, &rawOffset, rest[nameLen:nameLen+extraLen]); f != nil {
			f.detail.Member = printableName(name)
			return nil, f
		}
		if off := new(big.Int).Add(new(big.Int).SetUint64(rawOffset), concat); off.IsInt64() {
			ent.offset = off.Int64()
		} else {
			ent.badOff = true
		}
		if z.count < keep {
			z.entries = append(z.entries, ent)
		}
		z.count++
		total += uint64(sizeCentral + nameLen + extraLen + commentLen)
	}
	for i := range z.entries {
		if z.entries[i].hasNUL {
			return nil, badZip("entry name contains a NUL byte")
		}
	}
	// zipfile ignores these fields; a conforming writer gets them right.
	if e.disk != 0 || e.diskCD != 0 {
		return nil, badZip("zipfiles that span multiple disks are not supported")
	}
	if e.entriesDisk != uint64(z.count) || e.entriesAll != uint64(z.count) {
		return nil, badZip("end of central directory counts %d entries, the directory has %d", e.entriesAll, z.count)
	}
	// Bytes after the comment are hxd's canonical-archive check
	// (canonical.go), made once the reference's checks pass.
	if e.location+sizeEnd+e.commentLen > size {
		return nil, badZip("archive comment length goes beyond the end of the file")
	}
	z.computeEnds()
	return z, nil
}

// decodeExtra is ZipInfo._decodeExtra: it reads the ZIP64 extra field.
func decodeExtra(ent *zipEntry, offset *uint64, extra []byte) *failure {
	for len(extra) >= 4 {
		tp := binary.LittleEndian.Uint16(extra)
		ln := int(binary.LittleEndian.Uint16(extra[2:]))
		if ln+4 > len(extra) {
			return badZip("corrupt extra field %04x", tp)
		}
		if tp == 0x0001 {
			data := extra[4 : ln+4]
			next := func(field string, dst *uint64) *failure {
				if len(data) < 8 {
					return badZip("corrupt zip64 extra field: %s not found", field)
				}
				*dst = binary.LittleEndian.Uint64(data)
				data = data[8:]
				return nil
			}
			if ent.usize == math.MaxUint64 || ent.usize == math.MaxUint32 {
				if f := next("file size", &ent.usize); f != nil {
					return f
				}
			}
			if ent.csize == math.MaxUint32 {
				if f := next("compress size", &ent.csize); f != nil {
					return f
				}
			}
			if *offset == math.MaxUint32 {
				if f := next("header offset", offset); f != nil {
					return f
				}
			}
		}
		extra = extra[ln+4:]
	}
	return nil
}

// decodeName decodes an entry name like zipfile: UTF-8 when flag bit 11
// is set (strict), CP437 otherwise (Python's cp437 codec, which maps
// every byte, as golang.org/x/text's CodePage437 does).
func decodeName(raw []byte, flags uint16) (string, bool) {
	if flags&flagUTF8 != 0 {
		return string(raw), utf8.Valid(raw)
	}
	ascii := true
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return string(raw), true
	}
	var b strings.Builder
	for _, c := range raw {
		b.WriteRune(charmap.CodePage437.DecodeByte(c))
	}
	return b.String(), true
}

// printableName is an entry name fit for a Detail: valid UTF-8, short.
func printableName(name string) string {
	name = strings.ToValidUTF8(name, "\ufffd")
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '\ufffd'
		}
		return r
	}, name)
	return truncate(name, 200)
}

// truncate shortens s to at most n bytes on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// computeEnds sets each entry's end (zipfile's _end_offset: the next
// header offset, or the central directory) and marks shared headers.
func (z *zipArchive) computeEnds() {
	order := make([]int, len(z.entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ea, eb := &z.entries[a], &z.entries[b]
		switch {
		case ea.badOff != eb.badOff:
			if ea.badOff {
				return 1
			}
			return -1
		case ea.offset < eb.offset:
			return -1
		case ea.offset > eb.offset:
			return 1
		}
		return 0
	})
	for k, i := range order {
		e := &z.entries[i]
		e.end = z.startDir
		if k+1 < len(order) {
			next := &z.entries[order[k+1]]
			if !next.badOff {
				e.end = min(next.offset, z.startDir)
			}
			if !e.badOff && !next.badOff && next.offset == e.offset {
				e.shared, next.shared = true, true
			}
		}
	}
}

// memberReader streams a member's uncompressed bytes, checks CRC-32 and
// size at the end, and reports failures as *failure (via memberError).
type memberReader struct {
	e      *zipEntry
	src    io.Reader // STORED data or the inflater
	crc    hash.Hash32
	n      uint64 // uncompressed bytes delivered
	flate  io.ReadCloser
	comp   *countingReader // compressed input of the inflater
	done   bool
	failed *failure
}

// memberError carries a *failure through io.Reader.
type memberError struct{ f *failure }

func (e *memberError) Error() string { return e.f.msg }

// open is ZipFile.open for reading, with hxd's structural checks.
func (z *zipArchive) open(e *zipEntry) (*memberReader, *failure) {
	withMember := func(f *failure) *failure {
		f.detail.Member = printableName(e.name)
		return f
	}
	if e.badOff {
		return nil, withMember(badZip("local header offset out of range"))
	}
	if e.offset < 0 {
		return nil, withMember(zipError(pyOSError, "negative local header offset"))
	}
	var hdr [sizeLocal]byte
	if e.offset > z.size-sizeLocal {
		return nil, withMember(badZip("truncated file header"))
	}
	if err := readAt(z.r, hdr[:], e.offset); err != nil {
		return nil, withMember(ioFailure(err, "local header"))
	}
	if binary.LittleEndian.Uint32(hdr[:]) != sigLocal {
		return nil, withMember(badZip("bad magic number for file header"))
	}
	if e.flags&flagPatched != 0 {
		return nil, withMember(zipError(pyNotImplementedError, "compressed patched data (flag bit 5)"))
	}
	if e.flags&flagStrongEnc != 0 {
		return nil, withMember(zipError(pyNotImplementedError, "strong encryption (flag bit 6)"))
	}
	nameLen := int64(binary.LittleEndian.Uint16(hdr[26:]))
	extraLen := int64(binary.LittleEndian.Uint16(hdr[28:]))
	dataAt := e.offset + sizeLocal + nameLen + extraLen
	if dataAt > z.size {
		return nil, withMember(badZip("truncated file header"))
	}
	names := make([]byte, nameLen+extraLen)
	if err := readAt(z.r, names, e.offset+sizeLocal); err != nil {
		return nil, withMember(ioFailure(err, "local header"))
	}
	localName, localExtra := names[:nameLen], names[nameLen:]
	localFlags := binary.LittleEndian.Uint16(hdr[6:])
	decoded, ok := decodeName(localName, localFlags)
	if !ok {
		return nil, withMember(zipError(pyUnicodeDecodeError, "local header name is not valid UTF-8"))
	}
	if decoded != e.name || !bytes.Equal(localName, e.rawName) {
		return nil, withMember(badZip("local header name differs from the central directory"))
	}
	// zipfile's overlap check, then hxd's.
	if e.csize > uint64(math.MaxInt64-dataAt) || dataAt+int64(e.csize) > e.end {
		return nil, withMember(badZip("entry data overlaps the next entry or the central directory"))
	}
	if e.shared {
		return nil, withMember(badZip("two entries share one local header"))
	}
	const checked = flagEncrypted | flagDescriptor | flagUTF8
	if localFlags&checked != e.flags&checked {
		return nil, withMember(badZip("local header flags differ from the central directory"))
	}
	if m := binary.LittleEndian.Uint16(hdr[8:]); m != e.method {
		return nil, withMember(badZip("local header method differs from the central directory"))
	}
	if localFlags&flagDescriptor == 0 {
		lcrc := binary.LittleEndian.Uint32(hdr[14:])
		lcsize := uint64(binary.LittleEndian.Uint32(hdr[18:]))
		lusize := uint64(binary.LittleEndian.Uint32(hdr[22:]))
		if lcsize == math.MaxUint32 || lusize == math.MaxUint32 {
			lusize, lcsize = localZip64(localExtra, lusize, lcsize)
		}
		if lcrc != e.crc || lcsize != e.csize || lusize != e.usize {
			return nil, withMember(badZip("local header CRC-32 or sizes differ from the central directory"))
		}
	}
	if e.method == methodStored && e.csize != e.usize {
		return nil, withMember(badZip("stored entry with different compressed and uncompressed sizes"))
	}
	dataEnd := dataAt + int64(e.csize)
	if e.flags&flagDescriptor != 0 {
		if f := z.checkDescriptor(e, dataEnd); f != nil {
			return nil, withMember(f)
		}
	}
	m := &memberReader{e: e, crc: crc32.NewIEEE()}
	section := io.NewSectionReader(z.r, dataAt, int64(e.csize))
	if e.method == methodDeflated {
		m.comp = &countingReader{r: bufio.NewReaderSize(section, int(min(max(e.csize, 16), 64<<10)))}
		m.flate = flate.NewReader(m.comp)
		m.src = m.flate
	} else {
		m.src = section
	}
	return m, nil
}

// localZip64 reads ZIP64 sizes from a local header's extra field (both
// present, uncompressed first).
func localZip64(extra []byte, usize, csize uint64) (uint64, uint64) {
	for len(extra) >= 4 {
		tp := binary.LittleEndian.Uint16(extra)
		ln := int(binary.LittleEndian.Uint16(extra[2:]))
		if ln+4 > len(extra) {
			break
		}
		if tp == 0x0001 && ln >= 16 {
			return binary.LittleEndian.Uint64(extra[4:]), binary.LittleEndian.Uint64(extra[12:])
		}
		extra = extra[ln+4:]
	}
	return usize, csize
}

// checkDescriptor checks the data descriptor after an entry's data: an
// optional signature, then CRC-32 and the sizes (4 or, for ZIP64, 8 bytes
// each), equal to the central directory's.
func (z *zipArchive) checkDescriptor(e *zipEntry, at int64) *failure {
	var b [24]byte
	n := min(int64(len(b)), e.end-at, z.size-at)
	if n < 12 {
		return badZip("data descriptor missing")
	}
	if err := readAt(z.r, b[:n], at); err != nil {
		return ioFailure(err, "data descriptor")
	}
	if len(descriptorLengths(b[:n], e)) == 0 {
		return badZip("data descriptor disagrees with the central directory")
	}
	return nil
}

// descriptorLengths are the lengths of the data descriptor forms that d
// (the bytes after an entry's data) starts with and that repeat the
// central directory's CRC-32 and sizes: with or without the signature,
// with 32- or 64-bit sizes (16, 24, 12 or 20 bytes).
func descriptorLengths(d []byte, e *zipEntry) []int64 {
	var out []int64
	match := func(d []byte, skip int64) {
		if len(d) < 12 || binary.LittleEndian.Uint32(d) != e.crc {
			return
		}
		if uint64(binary.LittleEndian.Uint32(d[4:])) == e.csize && uint64(binary.LittleEndian.Uint32(d[8:])) == e.usize {
			out = append(out, skip+12)
		}
		if len(d) >= 20 && binary.LittleEndian.Uint64(d[4:]) == e.csize && binary.LittleEndian.Uint64(d[12:]) == e.usize {
			out = append(out, skip+20)
		}
	}
	if len(d) >= 16 && binary.LittleEndian.Uint32(d) == sigDescriptor {
		match(d[4:], 4)
	}
	match(d, 0)
	return out
}

// Read implements io.Reader. At the end it checks the size, CRC-32 and,
// for DEFLATE, that the compressed data was consumed exactly.
func (m *memberReader) Read(p []byte) (int, error) {
	if m.failed != nil {
		return 0, &memberError{m.failed}
	}
	if m.done {
		return 0, io.EOF
	}
	if rest := m.e.usize - m.n; uint64(len(p)) > rest && rest < math.MaxUint64 {
		p = p[:rest+1] // one more than declared reveals an overlong member
	}
	n, err := m.src.Read(p)
	if n > 0 {
		m.n += uint64(n)
		if m.n > m.e.usize {
			return 0, m.fail(badZip("member is longer than its declared size"))
		}
		m.crc.Write(p[:n])
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF):
		if f := m.finish(); f != nil {
			return n, m.fail(f)
		}
		m.done = true
		return n, io.EOF
	default:
		var corrupt flate.CorruptInputError
		switch {
		case errors.As(err, &corrupt):
			return n, m.fail(zipError(pyZlibError, "invalid DEFLATE data"))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return n, m.fail(badZip("member data is truncated"))
		}
		return n, m.fail(ioFailure(err, "member data"))
	}
}

func (m *memberReader) fail(f *failure) error {
	f.detail.Member = printableName(m.e.name)
	m.failed = f
	return &memberError{f}
}

func (m *memberReader) finish() *failure {
	if m.n != m.e.usize {
		return badZip("member is shorter than its declared size")
	}
	if m.comp != nil && m.comp.n != m.e.csize {
		return badZip("DEFLATE data does not end at the declared compressed size")
	}
	if m.crc.Sum32() != m.e.crc {
		return badZip("bad CRC-32")
	}
	return nil
}

// countingReader counts the bytes the inflater consumed. It implements
// io.ByteReader so that flate does not read ahead.
type countingReader struct {
	r *bufio.Reader
	n uint64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += uint64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}
