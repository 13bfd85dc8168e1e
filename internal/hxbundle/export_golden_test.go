package hxbundle

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// exGoldenSource is a fixed journal whose records reference three
// artifacts: one readable, one whose read fails halfway (its spooled
// bytes are rolled back and overwritten) and one missing. Its keys sort
// so that the failing one comes between the others.
func exGoldenSource() *exSource {
	good := []byte("overdue: 1,234.00 EUR\n")
	broken := []byte("a read of this artifact fails after its first byte")
	recs := exCompleteRun(good)
	refs := []string{exSHA(good), exSHA(broken), strings.Repeat("0", 64)}
	recs = append(recs, exRecord(int64(len(recs)+1), "tool.returned",
		`{"tool_call_id":"call-1","content":"see artifact://`+strings.Join(refs, " and artifact://")+
			`","is_error":false,"api_key":"sk-secret","nested":"{\"password\":\"x\",\"n\":1e2}","unicode":"é\u2028\ud83d\ude00<&>"}`))
	return &exSource{
		records:   recs,
		artifacts: map[string][]byte{exSHA(good): good, exSHA(broken): broken},
		readFail:  map[string]bool{exSHA(broken): true},
	}
}

// TestExportGoldenBytes: what Build writes for a fixed journal is byte for
// byte the committed bundle, with payloads and artifacts and metadata
// only. The goldens were written by the hand-made ZIP writer that
// archive/zip's Writer.CreateRaw replaced (-update rewrites them).
func TestExportGoldenBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		policy Policy
	}{
		{"export-complete.hx", Policy{IncludePayloads: true, IncludeArtifacts: true}},
		{"export-metadata-only.hx", Policy{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			a, err := Build(context.Background(), exInfo(), exGoldenSource(), tc.policy, t.TempDir())
			require.NoError(t, err)
			defer func() { require.NoError(t, a.Close()) }()
			got, err := io.ReadAll(io.NewSectionReader(a.ReaderAt(), 0, a.Size()))
			require.NoError(t, err)
			r := Verify(a.ReaderAt(), a.Size(), DefaultLimits)
			require.True(t, r.Valid, "%+v", r.Details)
			path := filepath.Join("testdata", tc.file)
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./internal/hxbundle -run TestExportGoldenBytes -update")
			require.Equal(t, want, got)
		})
	}
}

// TestExportZip64FreeLimits: limits that would let archive/zip write a
// ZIP64 end record (65,535 entries or more) or overflow 32-bit sizes are
// refused.
func TestExportZip64FreeLimits(t *testing.T) {
	t.Parallel()
	require.NoError(t, Policy{Limits: Limits{MaxMembers: 65534, MaxBytes: 1<<32 - 1}}.Validate())
	require.ErrorIs(t, Policy{Limits: Limits{MaxMembers: 65535}}.Validate(), ErrInvalidPolicy)
	require.ErrorIs(t, Policy{Limits: Limits{MaxBytes: 1 << 32}}.Validate(), ErrInvalidPolicy)
}
