package hxbundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// manyRecords is a valid bundle of n records (several line batches).
func manyRecords(n int) *bundle {
	b := smallBundle()
	last := b.records[len(b.records)-1]
	b.records = b.records[:len(b.records)-1]
	for len(b.records) < n-1 {
		b.records = append(b.records, rec(0, "command.failed", "1", "1", nil,
			map[string]any{"phase": "tools", "type": "OSError", "message": fmt.Sprintf("attempt %d", len(b.records))}))
	}
	b.records = append(b.records, last)
	return b.renumber()
}

func TestRecordsAcrossBatches(t *testing.T) {
	t.Parallel()
	const n = 5000 // several batches of batchLines
	tests := []struct {
		name   string
		edit   func(b *bundle)
		limits Limits
		want   string
		seq    int
	}{
		{name: "valid"},
		{name: "duplicate id in a later batch", edit: func(b *bundle) { b.records[3999]["id"] = b.records[9]["id"] },
			want: msgRecordIdentity, seq: 4000},
		{name: "first record error wins", edit: func(b *bundle) {
			b.records[1199]["version"] = 2
			b.records[3299]["seq"] = 1
		}, want: msgJournalVersion, seq: 1200},
		{name: "a parse error in a later batch wins over a record error", edit: func(b *bundle) {
			b.records[1499]["kind"] = "nope"
			b.lines = nil
			var lines [][]byte
			for _, r := range b.records {
				lines = append(lines, marshal(t, r))
			}
			lines[4499] = []byte(`{"a":NaN}`)
			b.lines = lines
		}, want: msgNonFinite, seq: 4500},
		{name: "identity checked before later fields", edit: func(b *bundle) {
			b.records[2999]["id"] = b.records[2000]["id"]
			b.records[2999]["kind"] = "nope"
		}, want: msgRecordIdentity, seq: 3000},
		{name: "later fields after a valid identity", edit: func(b *bundle) {
			b.records[2999]["kind"] = "nope"
			b.records[3999]["id"] = b.records[20]["id"]
		}, want: msgUnknownKind, seq: 3000},
		{name: "too many records", limits: Limits{MaxRecords: n - 1}, want: msgTooManyRecords},
		{name: "too many records wins over a parse error", edit: func(b *bundle) {
			var lines [][]byte
			for _, r := range b.records {
				lines = append(lines, marshal(t, r))
			}
			lines[10] = []byte(`{`)
			b.lines = lines
		}, limits: Limits{MaxRecords: n - 1}, want: msgTooManyRecords},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := manyRecords(n)
			if tt.edit != nil {
				tt.edit(b)
			}
			data := b.build(t)
			r := verifyBytes(data, tt.limits)
			if tt.want == "" {
				require.True(t, r.Valid, "%+v", r)
				require.Equal(t, n, r.RecordCount)
				p, err := Playback(bytes.NewReader(data), int64(len(data)), tt.limits)
				require.NoError(t, err)
				require.Len(t, p.Records, n)
				for i, raw := range p.Records {
					var rec struct{ Seq int }
					require.NoError(t, json.Unmarshal(raw, &rec))
					require.Equal(t, i+1, rec.Seq)
				}
				return
			}
			require.Equal(t, []string{tt.want}, r.Issues, "%+v", r.Details)
			if tt.seq != 0 {
				require.Equal(t, tt.seq, r.Details[0].Seq)
			}
		})
	}
}

// TestRecordsChunking: the outcome does not depend on how the member is
// cut into chunks (line breaks of every kind across chunk boundaries).
func TestRecordsChunking(t *testing.T) {
	t.Parallel()
	b := manyRecords(300)
	var buf bytes.Buffer
	seps := []string{"\n", "\r\n", "\r"}
	for i, r := range b.records {
		buf.Write(marshal(t, r))
		buf.WriteString(seps[i%3])
	}
	records := buf.Bytes()
	v := &verifier{lim: DefaultLimits, runID: tRunID, sessionID: tSessionID}
	for _, size := range []int{1, 2, 3, 7, 64, 1000, len(records)} {
		s := newRecordStream(v)
		for off := 0; off < len(records); off += size {
			s.feed(records[off:min(off+size, len(records))])
		}
		s.finish()
		require.Nil(t, s.parseErr, "chunk %d", size)
		require.Nil(t, s.recErr, "chunk %d", size)
		require.Equal(t, 300, s.lines)
		require.Equal(t, 300, s.comp.records)
	}
}

// TestRecordStreamNeverFed: finishing an empty stream starts nothing.
func TestRecordStreamNeverFed(t *testing.T) {
	t.Parallel()
	s := newRecordStream(&verifier{lim: DefaultLimits})
	s.finish()
	require.Zero(t, s.lines)
	require.False(t, s.started)
}
