package hxbundle

import (
	"encoding/binary"
	"time"
)

// The bundle's ZIP structures are written by hand (REFERENCE §6.1): every
// member STORED with its CRC-32 and sizes in the local header, general
// purpose flags 0 (no data descriptor, no encryption, ASCII names), no
// extra fields, no comments, no directories, version made by 2.0 on Unix,
// version needed 2.0, external attributes 0600 (regular file bits only).
// Member times are the export time in UTC (the reference uses the
// exporter's local time, which nothing reads; UTC keeps the ZIP time equal
// to the manifest's created_at).

const (
	zwLocalHeaderLen   = 30
	zwCentralHeaderLen = 46
	zwEndRecordLen     = 22

	zwSigLocalHeader   = 0x04034b50
	zwSigCentralHeader = 0x02014b50
	zwSigEndRecord     = 0x06054b50

	zwVersion20    = 20
	zwMadeByUnix   = 3<<8 | zwVersion20
	zwMethodStored = 0
	zwExternalAttr = 0o600 << 16
	zwMinDOSYear   = 1980
	zwMaxDOSYear   = 2107
	zwFlags        = 0
)

// zwEntry is one member: where its local header starts and what it holds.
type zwEntry struct {
	name   string
	offset int64 // of the local header
	size   int64
	crc    uint32
	sha    [32]byte
}

// dataOffset is where the member's bytes start.
func (e zwEntry) dataOffset() int64 { return e.offset + zwLocalHeaderLen + int64(len(e.name)) }

// zwArchiveSize is the exact archive size for entries laid out back to back.
func zwArchiveSize(entries []zwEntry) int64 {
	n := int64(zwEndRecordLen)
	for _, e := range entries {
		n += zwLocalHeaderLen + zwCentralHeaderLen + 2*int64(len(e.name)) + e.size
	}
	return n
}

// zwDOSDateTime converts t (in UTC) to MS-DOS date and time, clamped to the
// representable years 1980-2107 (two-second resolution).
func zwDOSDateTime(t time.Time) (date, tm uint16) {
	t = t.UTC()
	switch {
	case t.Year() < zwMinDOSYear:
		t = time.Date(zwMinDOSYear, 1, 1, 0, 0, 0, 0, time.UTC)
	case t.Year() > zwMaxDOSYear:
		t = time.Date(zwMaxDOSYear, 12, 31, 23, 59, 58, 0, time.UTC)
	}
	date = uint16((t.Year()-zwMinDOSYear)<<9 | int(t.Month())<<5 | t.Day())
	tm = uint16(t.Hour()<<11 | t.Minute()<<5 | t.Second()/2)
	return date, tm
}

// zwAppendLocalHeader appends e's local file header (with its name).
// Offsets and sizes fit 32 bits: Policy.Validate caps MaxBytes.
func zwAppendLocalHeader(dst []byte, e zwEntry, date, tm uint16) []byte {
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, zwSigLocalHeader)
	dst = le.AppendUint16(dst, zwVersion20) // version needed
	dst = le.AppendUint16(dst, zwFlags)
	dst = le.AppendUint16(dst, zwMethodStored)
	dst = le.AppendUint16(dst, tm)
	dst = le.AppendUint16(dst, date)
	dst = le.AppendUint32(dst, e.crc)
	dst = le.AppendUint32(dst, uint32(e.size)) // compressed
	dst = le.AppendUint32(dst, uint32(e.size)) // uncompressed
	dst = le.AppendUint16(dst, uint16(len(e.name)))
	dst = le.AppendUint16(dst, 0) // extra field length
	return append(dst, e.name...)
}

// zwAppendCentralDirectory appends the central directory for entries,
// starting at offset cdOffset, and the end-of-central-directory record.
func zwAppendCentralDirectory(dst []byte, entries []zwEntry, cdOffset int64, date, tm uint16) []byte {
	le := binary.LittleEndian
	start := len(dst)
	for _, e := range entries {
		dst = le.AppendUint32(dst, zwSigCentralHeader)
		dst = le.AppendUint16(dst, zwMadeByUnix)
		dst = le.AppendUint16(dst, zwVersion20) // version needed
		dst = le.AppendUint16(dst, zwFlags)
		dst = le.AppendUint16(dst, zwMethodStored)
		dst = le.AppendUint16(dst, tm)
		dst = le.AppendUint16(dst, date)
		dst = le.AppendUint32(dst, e.crc)
		dst = le.AppendUint32(dst, uint32(e.size))
		dst = le.AppendUint32(dst, uint32(e.size))
		dst = le.AppendUint16(dst, uint16(len(e.name)))
		dst = le.AppendUint16(dst, 0) // extra field length
		dst = le.AppendUint16(dst, 0) // comment length
		dst = le.AppendUint16(dst, 0) // disk number start
		dst = le.AppendUint16(dst, 0) // internal attributes
		dst = le.AppendUint32(dst, zwExternalAttr)
		dst = le.AppendUint32(dst, uint32(e.offset))
		dst = append(dst, e.name...)
	}
	cdSize := len(dst) - start
	dst = le.AppendUint32(dst, zwSigEndRecord)
	dst = le.AppendUint16(dst, 0) // this disk
	dst = le.AppendUint16(dst, 0) // disk with the central directory
	dst = le.AppendUint16(dst, uint16(len(entries)))
	dst = le.AppendUint16(dst, uint16(len(entries)))
	dst = le.AppendUint32(dst, uint32(cdSize))
	dst = le.AppendUint32(dst, uint32(cdOffset))
	return le.AppendUint16(dst, 0) // comment length
}
