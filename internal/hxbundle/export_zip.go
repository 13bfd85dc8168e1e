package hxbundle

import (
	"archive/zip"
	"errors"
	"fmt"
	"time"
)

// The bundle's ZIP structures are written by archive/zip's
// Writer.CreateRaw (REFERENCE §6.1): every member STORED with its CRC-32
// and sizes in the local header, general purpose flags 0 (no data
// descriptor, no encryption, ASCII names), no extra fields, no comments,
// no directories, version made by 2.0 on Unix, version needed 2.0,
// external attributes 0600 (regular file bits only). Member times are the
// export time in UTC (the reference uses the exporter's local time, which
// nothing reads; UTC keeps the ZIP time equal to the manifest's
// created_at).

const (
	// zipLocalHeaderLen is the fixed part of a local file header; with
	// no extra field, a member's bytes start this far plus its name's
	// length after its header (finish checks that archive/zip agrees).
	zipLocalHeaderLen = 30
	zipVersion20      = 20
	zipMadeByUnix     = 3<<8 | zipVersion20
	zipExternalAttr   = 0o600 << 16
	zipMinDOSYear     = 1980
	zipMaxDOSYear     = 2107
)

// exportEntry is one member: where its local header starts and what it holds.
type exportEntry struct {
	name   string
	offset int64 // of the local header
	size   int64
	crc    uint32
	sha    [32]byte
}

// dataOffset is where the member's bytes start.
func (e exportEntry) dataOffset() int64 { return e.offset + zipLocalHeaderLen + int64(len(e.name)) }

// header is the member's FileHeader for CreateRaw, which writes the
// header fields as they are given (no extra fields, no data descriptor).
func (e exportEntry) header(date, tm uint16) *zip.FileHeader {
	return &zip.FileHeader{
		Name:           e.name,
		CreatorVersion: zipMadeByUnix,
		ReaderVersion:  zipVersion20,
		Method:         zip.Store,
		// CreateRaw writes the MS-DOS time fields; only CreateHeader
		// derives them from Modified (adding an extended-timestamp extra
		// field the bundle format does not have).
		ModifiedTime:       tm,   //nolint:staticcheck // SA1019: see above
		ModifiedDate:       date, //nolint:staticcheck // SA1019: see above
		CRC32:              e.crc,
		CompressedSize64:   uint64(e.size),
		UncompressedSize64: uint64(e.size),
		ExternalAttrs:      zipExternalAttr,
	}
}

// dosDateTime converts t (in UTC) to MS-DOS date and time, clamped to the
// representable years 1980-2107 (two-second resolution).
func dosDateTime(t time.Time) (date, tm uint16) {
	t = t.UTC()
	switch {
	case t.Year() < zipMinDOSYear:
		t = time.Date(zipMinDOSYear, 1, 1, 0, 0, 0, 0, time.UTC)
	case t.Year() > zipMaxDOSYear:
		t = time.Date(zipMaxDOSYear, 12, 31, 23, 59, 58, 0, time.UTC)
	}
	date = uint16((t.Year()-zipMinDOSYear)<<9 | int(t.Month())<<5 | t.Day())
	tm = uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2)
	return date, tm
}

// zipLayout is the io.Writer archive/zip writes the whole archive to when
// the export finishes. The members' bytes are already in the spool, at
// their offsets, written once while their CRC-32 and SHA-256 were
// computed; archive/zip, which writes a raw member's bytes as they come
// and only counts them, is handed zeros of the same length for them
// (zipPlaceholder), and zipLayout skips those ranges. Everything else it
// writes at its offset in the spool: the local headers into the room left
// in front of each member, then the manifest, the central directory and
// the end record.
type zipLayout struct {
	out *spoolWriter
	off int64 // archive offset of the next byte archive/zip writes
	// spooled are the members' byte ranges already in the spool, in
	// archive order.
	spooled []zipSpan
}

type zipSpan struct{ start, end int64 }

// Write implements io.Writer.
func (z *zipLayout) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(z.spooled) > 0 && z.off >= z.spooled[0].start {
			span := z.spooled[0]
			k := int(min(int64(len(p)), span.end-z.off))
			p, z.off = p[k:], z.off+int64(k)
			if z.off == span.end {
				z.spooled = z.spooled[1:]
			}
			continue
		}
		k := len(p)
		if len(z.spooled) > 0 {
			k = int(min(int64(k), z.spooled[0].start-z.off))
		}
		if z.out.off != z.off {
			z.out.seek(z.off)
		}
		if _, err := z.out.Write(p[:k]); err != nil {
			return n - len(p), err
		}
		p, z.off = p[k:], z.off+int64(k)
	}
	return n, nil
}

// zipPlaceholder stands for spooled member bytes (see zipLayout).
var zipPlaceholder [64 << 10]byte

// writeZip writes the archive around the spooled members (every entry but
// the last) and the manifest man (the last entry), and returns the
// archive's size.
func writeZip(out *spoolWriter, entries []exportEntry, man []byte, date, tm uint16) (int64, error) {
	z := &zipLayout{out: out}
	for _, e := range entries[:len(entries)-1] {
		z.spooled = append(z.spooled, zipSpan{e.dataOffset(), e.dataOffset() + e.size})
	}
	zw := zip.NewWriter(z)
	for i, e := range entries {
		w, err := zw.CreateRaw(e.header(date, tm))
		if err != nil {
			return 0, fmt.Errorf("write bundle: %s: %w", e.name, err)
		}
		if err := zw.Flush(); err != nil {
			return 0, fmt.Errorf("write bundle spool: %w", err)
		}
		if z.off != e.dataOffset() {
			return 0, fmt.Errorf("write bundle: local header of %s ends at %d, want %d", e.name, z.off, e.dataOffset())
		}
		if i == len(entries)-1 {
			if _, err := w.Write(man); err != nil {
				return 0, fmt.Errorf("write bundle spool: %w", err)
			}
			break
		}
		for left := e.size; left > 0; {
			k := min(left, int64(len(zipPlaceholder)))
			if _, err := w.Write(zipPlaceholder[:k]); err != nil {
				return 0, fmt.Errorf("write bundle spool: %w", err)
			}
			left -= k
		}
	}
	if err := zw.Close(); err != nil {
		return 0, fmt.Errorf("write bundle spool: %w", err)
	}
	if len(z.spooled) > 0 {
		return 0, errors.New("write bundle: member bytes left unaccounted")
	}
	return z.off, nil
}
