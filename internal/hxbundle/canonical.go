package hxbundle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
)

// Canonical archives. Python's zipfile (the reference's reader) reads a
// bundle through its central directory and accepts bytes that belong to
// no member it names: data prepended to the archive (it shifts every
// offset by the difference, as archive/zip's baseOffset does), local
// entries the directory does not list, gaps between members, and bytes
// after the end record's comment. Another ZIP reader (one that scans local
// headers, or trusts the written offsets) may then see other contents
// than the verifier did. hxd rejects them, once every check of the
// reference has passed (DESIGN §8), each with its own message and with
// the offsets and lengths in the detail:
//
//   - msgHiddenEntry: a local header signature in bytes no member claims;
//   - msgLeadingData: bytes before the first local header, or a central
//     directory offset that differs from where the directory is found;
//   - msgMemberOverlap, msgMemberGap: a member (local header, name, extra
//     field, data and data descriptor) that does not end exactly where the
//     next one, or the central directory, starts;
//   - msgZip64Locator: a ZIP64 end record of another size than the fixed
//     one, or a locator that points elsewhere (readers that follow it
//     would read another record);
//   - msgTrailingData: bytes after the end record and its declared comment.
//
// Data overlapping the next entry's header is the reference's own
// rejection (zipfile's "Overlapped entries", reported as "Invalid
// incident bundle (BadZipFile)" when the member is read); msgMemberOverlap
// covers what reaches this check anyway.
const (
	msgHiddenEntry   = "Bundle entry missing from the central directory"
	msgLeadingData   = "Data before the first bundle member"
	msgMemberOverlap = "Overlapping bundle members"
	msgMemberGap     = "Gap between bundle members"
	msgZip64Locator  = "Misplaced ZIP64 end record"
	msgTrailingData  = "Data after the end of the archive"
)

// extent is the byte range [start, end) of one member. ends are the
// possible ends (one, or one per data descriptor form that matches).
type extent struct {
	name  string
	start int64
	ends  []int64
}

// hole is a byte range no member claims; after and before name the
// members around it ("" for the start of the file or the directory).
type hole struct {
	start, end    int64
	after, before string
}

// checkCanonical rejects an archive with bytes that belong to no member
// the central directory names. It reads each entry's local header (30
// bytes, plus a data descriptor) and scans only unclaimed bytes, which
// the archive size (at most Limits.MaxBytes) bounds.
func (z *zipArchive) checkCanonical() *failure {
	exts := make([]extent, 0, len(z.entries))
	for i := range z.entries {
		x, f := z.extent(&z.entries[i])
		if f != nil {
			return f
		}
		exts = append(exts, x)
	}
	holes, f := layoutHoles(exts, z.startDir)
	if f != nil {
		return f
	}
	var buf []byte // one read buffer for every hole
	for _, h := range holes {
		at, f := z.findLocalHeader(h.start, h.end, &buf)
		if f != nil {
			return f
		}
		if at >= 0 {
			return z.hiddenEntry(at, h)
		}
	}
	if len(holes) > 0 && holes[0].after == "" {
		h := holes[0]
		return &failure{msg: msgLeadingData, detail: Detail{Member: printableName(h.before),
			Message: fmt.Sprintf("%d bytes at offset 0 before the first local header", h.end)}}
	}
	if z.offsetCD != uint64(z.startDir) {
		return &failure{msg: msgLeadingData, detail: Detail{Message: fmt.Sprintf(
			"the end record gives central directory offset %d, the directory is at offset %d", z.offsetCD, z.startDir)}}
	}
	if len(holes) > 0 {
		h := holes[0] // the first gap: holes[0] is not a prefix here
		before := "the central directory"
		if h.before != "" {
			before = "member " + printableName(h.before)
		}
		return &failure{msg: msgMemberGap, detail: Detail{Member: printableName(h.after),
			Message: fmt.Sprintf("%d bytes at offset %d between member %s and %s",
				h.end-h.start, h.start, printableName(h.after), before)}}
	}
	e := z.end
	if e.zip64 && (e.end64Size != sizeEnd64-12 || e.end64Declared != e.end64At) {
		return &failure{msg: msgZip64Locator, detail: Detail{Message: fmt.Sprintf(
			"ZIP64 end record at offset %d declares %d bytes; its locator gives offset %d",
			e.end64At, e.end64Size, e.end64Declared)}}
	}
	if tail := e.location + sizeEnd + e.commentLen; tail < z.size {
		return &failure{msg: msgTrailingData, detail: Detail{Message: fmt.Sprintf(
			"%d bytes at offset %d after the end record and its %d-byte comment", z.size-tail, tail, e.commentLen)}}
	}
	return nil
}

// extent reads e's local header and, with flag bit 3, its data
// descriptor, to compute where the member ends.
func (z *zipArchive) extent(e *zipEntry) (extent, *failure) {
	at := e.offset
	var hdr [sizeLocal]byte
	if e.badOff || at < 0 || at > z.size-sizeLocal {
		return extent{}, badZip("local header offset out of range")
	}
	if err := readAt(z.r, hdr[:], at); err != nil {
		return extent{}, ioFailure(err, "local header")
	}
	dataEnd := at + sizeLocal + int64(binary.LittleEndian.Uint16(hdr[26:])) +
		int64(binary.LittleEndian.Uint16(hdr[28:])) + int64(e.csize)
	x := extent{name: e.name, start: at, ends: []int64{dataEnd}}
	if binary.LittleEndian.Uint16(hdr[6:])&flagDescriptor == 0 {
		return x, nil
	}
	var b [24]byte
	n := min(int64(len(b)), z.size-dataEnd)
	if n < 0 {
		return extent{}, badZip("data descriptor missing")
	}
	if err := readAt(z.r, b[:n], dataEnd); err != nil {
		return extent{}, ioFailure(err, "data descriptor")
	}
	x.ends = x.ends[:0]
	for _, l := range descriptorLengths(b[:n], e) {
		x.ends = append(x.ends, dataEnd+l)
	}
	if len(x.ends) == 0 {
		return extent{}, badZip("data descriptor disagrees with the central directory")
	}
	return x, nil
}

// layoutHoles sorts the extents by start and returns the unclaimed byte
// ranges between offset 0 and dirStart, in order. A member ends where the
// next one (or the directory) starts if one of its possible ends is
// there, else at its first possible end. A member that ends after the
// next one starts is msgMemberOverlap.
func layoutHoles(exts []extent, dirStart int64) ([]hole, *failure) {
	slices.SortStableFunc(exts, func(a, b extent) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	var holes []hole
	cursor, prev := int64(0), ""
	for k, x := range exts {
		if x.start > cursor {
			holes = append(holes, hole{start: cursor, end: x.start, after: prev, before: x.name})
		}
		next, nextName := dirStart, "the central directory"
		if k+1 < len(exts) {
			next, nextName = exts[k+1].start, "member "+printableName(exts[k+1].name)
		}
		end := x.ends[0]
		if slices.Contains(x.ends, next) {
			end = next
		}
		if end > next || x.start < cursor {
			return nil, &failure{msg: msgMemberOverlap, detail: Detail{Member: printableName(x.name),
				Message: fmt.Sprintf("member %s spans offsets %d to %d, %s starts at offset %d",
					printableName(x.name), x.start, end, nextName, next)}}
		}
		cursor, prev = end, x.name
	}
	if cursor < dirStart {
		holes = append(holes, hole{start: cursor, end: dirStart, after: prev})
	}
	return holes, nil
}

// findLocalHeader returns the offset of the first local header signature
// in [start, end), or -1. It reads 64 KiB at a time into *buf, which it
// grows as needed and keeps for the next call.
func (z *zipArchive) findLocalHeader(start, end int64, buf *[]byte) (int64, *failure) {
	sig := []byte{0x50, 0x4b, 0x03, 0x04}
	const chunk = 64 << 10
	if need := min(end-start, chunk+int64(len(sig)-1)); int64(len(*buf)) < need {
		*buf = make([]byte, need)
	}
	for at := start; at < end; at += chunk {
		b := (*buf)[:min(end-at, chunk+int64(len(sig)-1))]
		if err := readAt(z.r, b, at); err != nil {
			return 0, ioFailure(err, "archive")
		}
		if k := bytes.Index(b, sig); k >= 0 {
			return at + int64(k), nil
		}
	}
	return -1, nil
}

// hiddenEntry reports the local header at at, found in h, with its name
// when the header is complete.
func (z *zipArchive) hiddenEntry(at int64, h hole) *failure {
	d := Detail{Message: fmt.Sprintf("local header at offset %d, in %d unclaimed bytes at offset %d", at, h.end-h.start, h.start)}
	var hdr [sizeLocal]byte
	if at+sizeLocal <= h.end && readAt(z.r, hdr[:], at) == nil {
		n := min(int64(binary.LittleEndian.Uint16(hdr[26:])), h.end-at-sizeLocal, 256)
		name := make([]byte, n)
		if readAt(z.r, name, at+sizeLocal) == nil {
			decoded, _ := decodeName(name, binary.LittleEndian.Uint16(hdr[6:]))
			d.Member = printableName(decoded)
		}
	}
	return &failure{msg: msgHiddenEntry, detail: d}
}
