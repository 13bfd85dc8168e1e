package hxbundle

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// zmember is one central directory entry of a test archive.
type zmember struct {
	name              string
	central, local    int // header offsets
	dataEnd           int // end of the compressed data
	crc               uint32
	csize, usize      uint32
	flags             uint16
	nameLen, extraLen int // of the local header
}

// zmembers parses the central directory of an archive whose end record
// (without ZIP64) is the last 22 bytes plus commentLen.
func zmembers(t testing.TB, data []byte, commentLen int) ([]zmember, int) {
	t.Helper()
	end := len(data) - sizeEnd - commentLen
	require.Equal(t, uint32(sigEnd), binary.LittleEndian.Uint32(data[end:]))
	n := int(binary.LittleEndian.Uint16(data[end+10:]))
	cd := int(binary.LittleEndian.Uint32(data[end+16:]))
	var out []zmember
	for range n {
		require.Equal(t, uint32(sigCentral), binary.LittleEndian.Uint32(data[cd:]))
		nameLen := int(binary.LittleEndian.Uint16(data[cd+28:]))
		m := zmember{
			name: string(data[cd+46 : cd+46+nameLen]), central: cd,
			local: int(binary.LittleEndian.Uint32(data[cd+42:])),
			flags: binary.LittleEndian.Uint16(data[cd+8:]),
			crc:   binary.LittleEndian.Uint32(data[cd+16:]), csize: binary.LittleEndian.Uint32(data[cd+20:]),
			usize: binary.LittleEndian.Uint32(data[cd+24:]),
		}
		m.nameLen = int(binary.LittleEndian.Uint16(data[m.local+26:]))
		m.extraLen = int(binary.LittleEndian.Uint16(data[m.local+28:]))
		m.dataEnd = m.local + sizeLocal + m.nameLen + m.extraLen + int(m.csize)
		out = append(out, m)
		cd += sizeCentral + nameLen + int(binary.LittleEndian.Uint16(data[cd+30:])) + int(binary.LittleEndian.Uint16(data[cd+32:]))
	}
	return out, end
}

// splice replaces del bytes at offset at (before the central directory)
// by ins, and moves the central directory offset and every local header
// offset at or after at+del, as a writer that produced those bytes would
// have written them.
func splice(t testing.TB, data []byte, at, del int, ins []byte) []byte {
	t.Helper()
	ms, end := zmembers(t, data, 0)
	cd := int(binary.LittleEndian.Uint32(data[end+16:]))
	require.LessOrEqual(t, at+del, cd)
	delta := len(ins) - del
	out := append(append(append([]byte{}, data[:at]...), ins...), data[at+del:]...)
	end += delta
	put32(out, end+16, uint32(cd+delta))
	for _, m := range ms {
		if m.local >= at+del {
			put32(out, m.central+delta+42, uint32(m.local+delta))
		}
	}
	return out
}

// member returns the named member of an archive.
func member(t testing.TB, data []byte, name string) zmember {
	t.Helper()
	ms, _ := zmembers(t, data, 0)
	for _, m := range ms {
		if m.name == name {
			return m
		}
	}
	t.Fatalf("no member %q", name)
	return zmember{}
}

// hiddenLocalEntry is a complete local entry (header, name, data) named
// notes.txt, as archive/zip writes it, without its central directory.
func hiddenLocalEntry(t testing.TB) []byte {
	t.Helper()
	z := zipStored(t, []file{{"notes.txt", []byte("seen only by readers that scan local headers")}})
	_, end := zmembers(t, z, 0)
	return z[:binary.LittleEndian.Uint32(z[end+16:])]
}

// deflatedBundle is the small bundle with every member DEFLATEd by
// archive/zip, which writes a data descriptor (16 bytes, signed) after
// each.
func deflatedBundle(t testing.TB) []byte {
	t.Helper()
	small := smallBundle()
	return zipWith(t, small.files(t), map[string]zipOpt{
		memberRecords: {deflate: true}, memberManifest: {deflate: true}, artifactPrefix + artKey: {deflate: true}})
}

// descriptor renders a data descriptor for m: signed or not, 32- or
// 64-bit sizes.
func descriptor(m zmember, signed, wide bool) []byte {
	var d []byte
	if signed {
		d = binary.LittleEndian.AppendUint32(d, sigDescriptor)
	}
	d = binary.LittleEndian.AppendUint32(d, m.crc)
	if wide {
		d = binary.LittleEndian.AppendUint64(d, uint64(m.csize))
		return binary.LittleEndian.AppendUint64(d, uint64(m.usize))
	}
	d = binary.LittleEndian.AppendUint32(d, m.csize)
	return binary.LittleEndian.AppendUint32(d, m.usize)
}

// withDescriptors rewrites every member's signed 32-bit data descriptor
// in the given form.
func withDescriptors(t testing.TB, data []byte, signed, wide bool) []byte {
	t.Helper()
	ms, _ := zmembers(t, data, 0)
	for k := len(ms) - 1; k >= 0; k-- { // from the end: earlier offsets stay put
		m := ms[k]
		require.NotZero(t, m.flags&flagDescriptor, m.name)
		require.Equal(t, descriptor(m, true, false), data[m.dataEnd:m.dataEnd+16], m.name)
		data = splice(t, data, m.dataEnd, 16, descriptor(m, signed, wide))
	}
	return data
}

// TestCanonicalArchive: every case of bytes outside the members the
// central directory names gets its own rejection, with offsets, lengths
// and the member concerned in the detail; archives whose every byte
// belongs to a member, the directory or the end record stay valid.
func TestCanonicalArchive(t *testing.T) {
	t.Parallel()
	base := baseBundle().build(t)
	ms, end := zmembers(t, base, 0)
	require.Equal(t, []string{memberRecords, artifactPrefix + sha(tArtifact), memberManifest},
		[]string{ms[0].name, ms[1].name, ms[2].name})
	cd := int(binary.LittleEndian.Uint32(base[end+16:]))
	art := ms[1].name
	hidden := hiddenLocalEntry(t)
	stub := []byte("#!/bin/sh\nexit 0\n")

	tests := []struct {
		name   string
		data   func() []byte
		issue  string
		member string
		msg    string
	}{
		{name: "data prepended, offsets as written", data: func() []byte { return append(append([]byte{}, stub...), base...) },
			issue: msgLeadingData, member: memberRecords, msg: "17 bytes at offset 0 before the first local header"},
		{name: "data prepended, offsets shifted", data: func() []byte { return splice(t, base, 0, 0, stub) },
			issue: msgLeadingData, member: memberRecords, msg: "17 bytes at offset 0 before the first local header"},
		{name: "central directory offset differs from where it is", data: func() []byte {
			// Every written offset 100 too high: zipfile subtracts the
			// difference; a reader that trusts the offsets reads elsewhere.
			d := append([]byte{}, base...)
			put32(d, end+16, uint32(cd+100))
			for _, m := range ms {
				put32(d, m.central+42, uint32(m.local+100))
			}
			return d
		}, issue: msgLeadingData,
			msg: fmt.Sprintf("the end record gives central directory offset %d, the directory is at offset %d", cd+100, cd)},
		{name: "local entry between members", data: func() []byte { return splice(t, base, ms[1].local, 0, hidden) },
			issue: msgHiddenEntry, member: "notes.txt",
			msg: fmt.Sprintf("local header at offset %d, in %d unclaimed bytes at offset %d", ms[1].local, len(hidden), ms[1].local)},
		{name: "local entry before the first member", data: func() []byte { return splice(t, base, 0, 0, hidden) },
			issue: msgHiddenEntry, member: "notes.txt",
			msg: fmt.Sprintf("local header at offset 0, in %d unclaimed bytes at offset 0", len(hidden))},
		{name: "local entry before the central directory", data: func() []byte { return splice(t, base, cd, 0, append([]byte("xx"), hidden...)) },
			issue: msgHiddenEntry, member: "notes.txt",
			msg: fmt.Sprintf("local header at offset %d, in %d unclaimed bytes at offset %d", cd+2, len(hidden)+2, cd)},
		{name: "gap between members", data: func() []byte { return splice(t, base, ms[1].local, 0, make([]byte, 9)) },
			issue: msgMemberGap, member: memberRecords,
			msg: fmt.Sprintf("9 bytes at offset %d between member %s and member %s", ms[1].local, memberRecords, art)},
		{name: "gap before the central directory", data: func() []byte { return splice(t, base, cd, 0, []byte("tail")) },
			issue: msgMemberGap, member: memberManifest,
			msg: fmt.Sprintf("4 bytes at offset %d between member %s and the central directory", cd, memberManifest)},
		{name: "data overlapping the next member stays the reference's rejection", data: func() []byte {
			// The artifact's data is declared 8 bytes longer: it runs
			// into the manifest's local header (zipfile's "Overlapped
			// entries").
			d := append([]byte{}, base...)
			m := ms[1]
			for _, at := range []int{m.local + 18, m.local + 22, m.central + 20, m.central + 24} {
				put32(d, at, m.csize+8)
			}
			return d
		}, issue: generic(pyBadZipFile), member: art, msg: "entry data overlaps the next entry or the central directory"},
		{name: "bytes after the end record", data: func() []byte { return append(append([]byte{}, base...), "junk"...) },
			issue: msgTrailingData, msg: fmt.Sprintf("4 bytes at offset %d after the end record and its 0-byte comment", len(base))},
		{name: "bytes after the declared comment", data: func() []byte {
			d := append([]byte{}, base...)
			put16(d, len(d)-2, 7)
			return append(d, "comment and more"...)
		}, issue: msgTrailingData, msg: fmt.Sprintf("9 bytes at offset %d after the end record and its 7-byte comment", len(base)+7)},
		{name: "bytes after ZIP64 end records", data: func() []byte { return append(withZip64End(base, 1), 0) },
			issue: msgTrailingData, msg: fmt.Sprintf("1 bytes at offset %d after the end record and its 0-byte comment", len(base)+56+20)},
		{name: "ZIP64 locator pointing elsewhere", data: func() []byte {
			d := withZip64End(base, 1)
			put32(d, len(d)-sizeEnd-sizeEnd64Loc+8, 0)
			return d
		}, issue: msgZip64Locator, msg: fmt.Sprintf("ZIP64 end record at offset %d declares 44 bytes; its locator gives offset 0", len(base)-sizeEnd)},
		{name: "ZIP64 end record of another size", data: func() []byte {
			d := withZip64End(base, 1)
			put32(d, len(base)-sizeEnd+4, 52)
			return d
		}, issue: msgZip64Locator, msg: fmt.Sprintf("ZIP64 end record at offset %d declares 52 bytes; its locator gives offset %d", len(base)-sizeEnd, len(base)-sizeEnd)},
		{name: "gap after a data descriptor", data: func() []byte {
			d := deflatedBundle(t)
			m := member(t, d, memberRecords)
			return splice(t, d, m.dataEnd+16, 0, []byte{0, 0, 0})
		}, issue: msgMemberGap, member: memberRecords},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := verifyBytes(tt.data(), DefaultLimits)
			require.False(t, r.Valid)
			require.Equal(t, []string{tt.issue}, r.Issues, "%+v", r.Details)
			require.Len(t, r.Details, 1)
			require.Equal(t, tt.issue, r.Details[0].Issue)
			require.Equal(t, tt.member, r.Details[0].Member)
			if tt.msg != "" {
				require.Equal(t, tt.msg, r.Details[0].Message)
			}
		})
	}
}

// TestCanonicalArchiveAccepts: data descriptors of every form (signed or
// not, 32- or 64-bit sizes) count as part of their member; a declared
// archive comment and ZIP64 end records are part of the end record; a
// clean hxd export verifies with no new issue.
func TestCanonicalArchiveAccepts(t *testing.T) {
	t.Parallel()
	base := baseBundle().build(t)
	export, err := os.ReadFile(filepath.Join("testdata", "export-complete.hx"))
	require.NoError(t, err)
	tests := []struct {
		name string
		data func() []byte
		want []string // completeness issues
	}{
		// The golden export's own issues (golden_test.go), nothing more.
		{name: "hxd export", data: func() []byte { return export },
			want: []string{"payloads_omitted_or_redacted", "artifacts_unavailable"}},
		{name: "stored, no descriptors", data: func() []byte { return base }},
		{name: "archive comment", data: func() []byte {
			d := append([]byte{}, base...)
			put16(d, len(d)-2, 7)
			return append(d, "comment"...)
		}},
		{name: "ZIP64 end records", data: func() []byte { return withZip64End(base, 1) }},
		{name: "signed 32-bit descriptors (archive/zip)", data: func() []byte { return deflatedBundle(t) }},
		{name: "unsigned 32-bit descriptors", data: func() []byte { return withDescriptors(t, deflatedBundle(t), false, false) }},
		{name: "signed 64-bit descriptors", data: func() []byte { return withDescriptors(t, deflatedBundle(t), true, true) }},
		{name: "unsigned 64-bit descriptors", data: func() []byte { return withDescriptors(t, deflatedBundle(t), false, true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := verifyBytes(tt.data(), DefaultLimits)
			require.True(t, r.Valid, "%+v", r)
			if tt.want == nil {
				tt.want = []string{}
			}
			require.Equal(t, tt.want, r.Issues, "%+v", r.Details)
		})
	}
}

// TestLayoutHoles: the pure extent arithmetic, including the overlap the
// reader's own checks reject before it (a member ending past the next
// one's start).
func TestLayoutHoles(t *testing.T) {
	t.Parallel()
	x := func(name string, start int64, ends ...int64) extent {
		return extent{name: name, start: start, ends: ends}
	}
	tests := []struct {
		name    string
		exts    []extent
		dir     int64
		holes   []hole
		overlap string
	}{
		{name: "tiled", exts: []extent{x("b", 10, 30), x("a", 0, 10)}, dir: 30},
		{name: "empty archive", dir: 0},
		{name: "only a prefix", exts: nil, dir: 5, holes: []hole{{start: 0, end: 5}}},
		{name: "descriptor form ending at the next member wins", exts: []extent{x("a", 0, 12, 16), x("b", 16, 20)}, dir: 20},
		{name: "no form reaches the next member: the first is the end", exts: []extent{x("a", 0, 12, 14), x("b", 16, 20)}, dir: 20,
			holes: []hole{{start: 12, end: 16, after: "a", before: "b"}}},
		{name: "prefix, gap and tail", exts: []extent{x("a", 3, 10), x("b", 12, 20)}, dir: 25,
			holes: []hole{{start: 0, end: 3, before: "a"}, {start: 10, end: 12, after: "a", before: "b"}, {start: 20, end: 25, after: "b"}}},
		{name: "overlap with the next member", exts: []extent{x("a", 0, 12), x("b", 10, 20)}, dir: 20,
			overlap: "member a spans offsets 0 to 12, member b starts at offset 10"},
		{name: "overlap with the central directory", exts: []extent{x("a", 0, 12)}, dir: 11,
			overlap: "member a spans offsets 0 to 12, the central directory starts at offset 11"},
		{name: "shared start", exts: []extent{x("a", 0, 12), x("b", 0, 12)}, dir: 12,
			overlap: "member a spans offsets 0 to 12, member b starts at offset 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			holes, f := layoutHoles(tt.exts, tt.dir)
			if tt.overlap != "" {
				require.NotNil(t, f)
				require.Equal(t, msgMemberOverlap, f.msg)
				require.Equal(t, tt.overlap, f.detail.Message)
				require.Equal(t, "a", f.detail.Member)
				return
			}
			require.Nil(t, f)
			require.Equal(t, tt.holes, holes)
		})
	}
}

// TestFindLocalHeader: the scan finds a signature that straddles two
// 64 KiB reads, and nothing in bytes without one.
func TestFindLocalHeader(t *testing.T) {
	t.Parallel()
	data := make([]byte, 200<<10)
	z := &zipArchive{r: bytes.NewReader(data), size: int64(len(data))}
	var buf []byte
	at, f := z.findLocalHeader(0, int64(len(data)), &buf)
	require.Nil(t, f)
	require.Equal(t, int64(-1), at)
	copy(data[(64<<10)-2:], "PK\x03\x04")
	at, f = z.findLocalHeader(5, int64(len(data)), &buf)
	require.Nil(t, f)
	require.Equal(t, int64(64<<10)-2, at)
	at, f = z.findLocalHeader((64<<10)-1, int64(len(data)), &buf)
	require.Nil(t, f)
	require.Equal(t, int64(-1), at)
}

// canonicalSeeds are the FuzzVerify seeds of the canonical-archive
// checks, made from the small bundle, with the issue each must get.
func canonicalSeeds(t testing.TB) map[string]struct {
	data  []byte
	issue string
} {
	t.Helper()
	small := smallBundle().build(t)
	ms, end := zmembers(t, small, 0)
	cd := int(binary.LittleEndian.Uint32(small[end+16:]))
	overlap := append([]byte{}, small...)
	for _, at := range []int{ms[1].local + 18, ms[1].local + 22, ms[1].central + 20, ms[1].central + 24} {
		put32(overlap, at, ms[1].csize+8)
	}
	locator := withZip64End(small, 1)
	put32(locator, len(locator)-sizeEnd-sizeEnd64Loc+8, 0)
	deflated := deflatedBundle(t)
	return map[string]struct {
		data  []byte
		issue string
	}{
		"canonical-leading":              {append([]byte("#!/bin/sh\n"), small...), msgLeadingData},
		"canonical-leading-shifted":      {splice(t, small, 0, 0, []byte("#!/bin/sh\n")), msgLeadingData},
		"canonical-hidden-entry":         {splice(t, small, ms[1].local, 0, hiddenLocalEntry(t)), msgHiddenEntry},
		"canonical-gap":                  {splice(t, small, ms[1].local, 0, []byte{0, 0, 0}), msgMemberGap},
		"canonical-gap-before-directory": {splice(t, small, cd, 0, []byte{0}), msgMemberGap},
		"canonical-gap-after-descriptor": {splice(t, deflated, member(t, deflated, memberRecords).dataEnd+16, 0, []byte{0}), msgMemberGap},
		"canonical-overlap":              {overlap, generic(pyBadZipFile)},
		"canonical-trailing":             {append(append([]byte{}, small...), "\r\n"...), msgTrailingData},
		"canonical-zip64-locator":        {locator, msgZip64Locator},
	}
}

// TestCanonicalSeeds: the committed FuzzVerify seeds of the canonical
// checks are the current ones (TestFuzzSeeds writes them with -update)
// and each gets its issue.
func TestCanonicalSeeds(t *testing.T) {
	t.Parallel()
	for name, s := range canonicalSeeds(t) {
		raw, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzVerify", name))
		require.NoError(t, err, name)
		require.Equal(t, fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data), string(raw), name)
		r := verifyBytes(s.data, fuzzLimits)
		require.Equal(t, []string{s.issue}, r.Issues, "%s: %+v", name, r.Details)
	}
}
