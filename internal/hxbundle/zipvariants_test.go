package hxbundle

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// withZip64End rewrites a plain archive's end record as zipfile would
// find a ZIP64 one: ZIP64 end record and locator, 32-bit fields maxed.
func withZip64End(data []byte, disks uint32) []byte {
	end := len(data) - sizeEnd
	eocd := data[end:]
	count := uint64(binary.LittleEndian.Uint16(eocd[10:]))
	cdSize := uint64(binary.LittleEndian.Uint32(eocd[12:]))
	cdOff := uint64(binary.LittleEndian.Uint32(eocd[16:]))
	out := append([]byte{}, data[:end]...)
	rec := len(out)
	out = binary.LittleEndian.AppendUint32(out, sigEnd64)
	out = binary.LittleEndian.AppendUint64(out, sizeEnd64-12)
	out = binary.LittleEndian.AppendUint16(out, 45)
	out = binary.LittleEndian.AppendUint16(out, 45)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, count)
	out = binary.LittleEndian.AppendUint64(out, count)
	out = binary.LittleEndian.AppendUint64(out, cdSize)
	out = binary.LittleEndian.AppendUint64(out, cdOff)
	out = binary.LittleEndian.AppendUint32(out, sigEnd64Loc)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, uint64(rec))
	out = binary.LittleEndian.AppendUint32(out, disks)
	out = binary.LittleEndian.AppendUint32(out, sigEnd)
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 0)
	out = binary.LittleEndian.AppendUint16(out, 0xffff)
	out = binary.LittleEndian.AppendUint16(out, 0xffff)
	out = binary.LittleEndian.AppendUint32(out, 0xffffffff)
	out = binary.LittleEndian.AppendUint32(out, 0xffffffff)
	return binary.LittleEndian.AppendUint16(out, 0)
}

// TestZipVariants: archive shapes zipfile accepts and a conforming writer
// may produce.
func TestZipVariants(t *testing.T) {
	t.Parallel()
	base := baseBundle().build(t)
	tests := []struct {
		name string
		data func() []byte
		want []string
	}{
		{name: "plain", data: func() []byte { return base }, want: []string{}},
		// zipfile reads it; hxd does not (canonical_test.go).
		{name: "data prepended (self-extractor style)", data: func() []byte {
			return append([]byte("#!/bin/sh\nexit 0\n"), base...)
		}, want: []string{msgLeadingData}},
		{name: "archive comment", data: func() []byte {
			d := append([]byte{}, base...)
			put16(d, len(d)-2, 7)
			return append(d, "comment"...)
		}, want: []string{}},
		{name: "ZIP64 end records", data: func() []byte { return withZip64End(base, 1) }, want: []string{}},
		{name: "ZIP64 on several disks", data: func() []byte { return withZip64End(base, 2) },
			want: []string{generic(pyBadZipFile)}},
		{name: "comment length beyond the file", data: func() []byte {
			d := append([]byte{}, base...)
			put16(d, len(d)-2, 7)
			return d
		}, want: []string{generic(pyBadZipFile)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := verifyBytes(tt.data(), DefaultLimits)
			require.Equal(t, tt.want, r.Issues, "%+v", r.Details)
		})
	}
}

// cp437Python is the upper half of code page 437 as Python's cp437 codec
// (what zipfile uses for names without the UTF-8 flag) maps it.
var cp437Python = []rune("ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»" +
	"░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀" +
	"αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u00a0")

// TestDecodeNameCP437: a name without the UTF-8 flag decodes every byte as
// Python's cp437 codec does (ASCII below 0x80); with the flag it must be
// valid UTF-8.
func TestDecodeNameCP437(t *testing.T) {
	t.Parallel()
	require.Len(t, cp437Python, 128)
	for c := range 256 {
		want := rune(c)
		if c >= 0x80 {
			want = cp437Python[c-0x80]
		}
		got, ok := decodeName([]byte{'a', byte(c), 'z'}, 0)
		require.True(t, ok)
		require.Equal(t, "a"+string(want)+"z", got, "byte %#x", c)
	}
	got, ok := decodeName([]byte("artifacts/\x80\xff"), 0)
	require.True(t, ok)
	require.Equal(t, "artifacts/Ç\u00a0", got)
	got, ok = decodeName([]byte("manifest.json"), 0)
	require.True(t, ok)
	require.Equal(t, "manifest.json", got)
	got, ok = decodeName([]byte("é"), flagUTF8)
	require.True(t, ok)
	require.Equal(t, "é", got)
	_, ok = decodeName([]byte("\x80"), flagUTF8)
	require.False(t, ok)
}
