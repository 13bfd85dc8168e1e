package hxbundle

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hxd/internal/journal"
)

// exSource is an in-memory Source.
type exSource struct {
	records   []journal.Record
	artifacts map[string][]byte
	// readFail names artifacts whose reads fail after the first bytes.
	readFail map[string]bool
	// recordsErr wraps what fn returns, like a store adding context.
	wrapErr bool
}

func (s *exSource) Records(ctx context.Context, fn func(journal.Record) error) error {
	for _, r := range s.records {
		if err := fn(r); err != nil {
			if s.wrapErr {
				return fmt.Errorf("store: read journal: %w", err)
			}
			return err
		}
	}
	return nil
}

func (s *exSource) OpenArtifact(ctx context.Context, key string) (io.ReadCloser, error) {
	b, ok := s.artifacts[key]
	if !ok {
		return nil, errors.New("artifact not found: /var/secret/path")
	}
	if s.readFail[key] {
		return io.NopCloser(io.MultiReader(bytes.NewReader(b[:1]), exErrReader{})), nil
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

type exErrReader struct{}

func (exErrReader) Read([]byte) (int, error) { return 0, errors.New("disk error") }

const (
	exRunID     = "run-1"
	exSessionID = "sess-1"
)

var exTime = time.Date(2025, 3, 4, 5, 6, 7, 891000000, time.UTC)

func exInfo() RunInfo {
	return RunInfo{
		RunID:      exRunID,
		SessionID:  exSessionID,
		Status:     "completed",
		Phase:      "result",
		Agent:      &AgentRef{Name: "invoice-analyst", Version: "v1"},
		SDKVersion: "hxd-test",
		ExportedAt: exTime,
	}
}

// exRecord builds stored record seq with the given kind and payload.
func exRecord(seq int64, kind journal.Kind, payload string) journal.Record {
	r := journal.Record{
		Version:    1,
		ID:         fmt.Sprintf("00000000-0000-4000-8000-%012d", seq),
		Kind:       kind,
		RecordedAt: journal.Timestamp(exTime.Add(time.Duration(seq) * time.Millisecond)),
		SessionID:  exSessionID,
		RunID:      exRunID,
		StepID:     "1",
		AttemptID:  "1",
		Payload:    json.RawMessage(payload),
		Seq:        seq,
	}
	if strings.HasPrefix(string(kind), "tool.") {
		key := exRunID + ":1:call-1"
		r.ExecutionKey = &key
	}
	return r
}

// exRecords builds a source from (kind, payload) pairs numbered from 1.
func exRecords(pairs ...string) []journal.Record {
	var out []journal.Record
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, exRecord(int64(len(out)+1), journal.Kind(pairs[i]), pairs[i+1]))
	}
	return out
}

func exSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// exBuild runs Build into a fresh folder and registers Close.
func exBuild(t *testing.T, info RunInfo, src Source, p Policy) (*Archive, string) {
	t.Helper()
	dir := t.TempDir()
	a, err := Build(context.Background(), info, src, p, dir)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, a.Close()) })
	return a, dir
}

// exBundle is a bundle read back with archive/zip.
type exBundle struct {
	raw      []byte
	names    []string
	members  map[string][]byte
	files    []*zip.File
	manifest map[string]any
	records  []map[string]any
	lines    [][]byte
}

func exReadBundle(t *testing.T, a *Archive) exBundle {
	t.Helper()
	var buf bytes.Buffer
	n, err := a.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, a.Size(), n)
	require.Equal(t, a.Size(), int64(buf.Len()))
	b := exBundle{raw: buf.Bytes(), members: map[string][]byte{}}
	zr, err := zip.NewReader(a.ReaderAt(), a.Size())
	require.NoError(t, err)
	for _, f := range zr.File {
		rc, err := f.Open()
		require.NoError(t, err)
		data, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		b.names = append(b.names, f.Name)
		b.members[f.Name] = data
		b.files = append(b.files, f)
	}
	require.NoError(t, json.Unmarshal(b.members["manifest.json"], &b.manifest))
	recs := b.members["records.jsonl"]
	if len(recs) > 0 {
		require.Equal(t, byte('\n'), recs[len(recs)-1])
		for _, line := range bytes.Split(recs[:len(recs)-1], []byte("\n")) {
			var m map[string]any
			require.NoError(t, json.Unmarshal(line, &m))
			b.records = append(b.records, m)
			b.lines = append(b.lines, line)
		}
	}
	return b
}

// exRequireCanonical checks that b is its own canonical form.
func exRequireCanonical(t *testing.T, b []byte) {
	t.Helper()
	c, err := journal.AppendCanonical(nil, b)
	require.NoError(t, err)
	require.Equal(t, string(c), string(b))
}

func exSortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var exManifestKeys = []string{
	"agent", "artifacts", "created_at", "format", "hxd", "last_sequence", "members", "phase",
	"python_version", "record_count", "run_id", "sdk_version", "session_id", "status",
	"unresolved_operations", "version",
}

var exRecordKeys = []string{
	"attempt_id", "capture", "execution_key", "id", "kind", "payload", "recorded_at", "run_id",
	"seq", "session_id", "step_id", "version",
}

func TestExportMetadataOnly(t *testing.T) {
	t.Parallel()
	art := exSHA([]byte("artifact"))
	src := &exSource{records: exRecords(
		"run.started", `{"message":"hi","api_key":"k"}`,
		"model.started", `{"messages":[],"file":"artifact://`+art+`"}`,
		"tool.returned", `{"content":"ok"}`,
		"checkpoint", `{"phase":"result","status":"completed","error":null,"extensions":{},"tools":[]}`,
	), artifacts: map[string][]byte{art: []byte("artifact")}}
	a, _ := exBuild(t, exInfo(), src, Policy{})
	b := exReadBundle(t, a)

	require.Equal(t, []string{"records.jsonl", "manifest.json"}, b.names)
	require.Len(t, b.records, 4)
	for i, r := range b.records {
		require.Equal(t, exRecordKeys, exSortedKeys(r))
		require.Nil(t, r["payload"])
		require.Equal(t, "omitted", r["capture"])
		require.EqualValues(t, i+1, r["seq"])
		require.Equal(t, src.records[i].ID, r["id"])
		require.Equal(t, string(src.records[i].Kind), r["kind"])
		require.Equal(t, src.records[i].RecordedAt, r["recorded_at"])
		exRequireCanonical(t, b.lines[i])
	}
	require.Nil(t, b.records[0]["execution_key"])
	require.Equal(t, "run-1:1:call-1", b.records[2]["execution_key"])
	// Omitted payloads drop their artifact references.
	require.Equal(t, map[string]any{}, b.manifest["artifacts"])
	require.EqualValues(t, 4, b.manifest["record_count"])
	require.EqualValues(t, 4, b.manifest["last_sequence"])
}

func TestExportManifest(t *testing.T) {
	t.Parallel()
	art := exSHA([]byte("bytes"))
	src := &exSource{records: exRecords(
		"run.started", `{"message":"hi"}`,
		"tool.returned", `{"content":"see artifact://`+art+`"}`,
	), artifacts: map[string][]byte{art: []byte("bytes")}}
	info := exInfo()
	info.Status, info.Phase = "awaiting_input", "tools"
	info.Unresolved = []UnresolvedOperation{{ExecutionKey: "run-1:1:call-1", Status: "uncertain", Attempt: 2}}
	a, _ := exBuild(t, info, src, Policy{IncludePayloads: true, IncludeArtifacts: true})
	b := exReadBundle(t, a)

	exRequireCanonical(t, b.members["manifest.json"])
	require.Equal(t, exManifestKeys, exSortedKeys(b.manifest))
	want := map[string]any{
		"format":         "harness-x.incident",
		"version":        1.0,
		"created_at":     "2025-03-04T05:06:07.891000+00:00",
		"run_id":         "run-1",
		"session_id":     "sess-1",
		"status":         "awaiting_input",
		"phase":          "tools",
		"agent":          map[string]any{"name": "invoice-analyst", "version": "v1"},
		"sdk_version":    "hxd-test",
		"python_version": "n/a",
		"record_count":   2.0,
		"last_sequence":  2.0,
		"unresolved_operations": []any{
			map[string]any{"execution_key": "run-1:1:call-1", "status": "uncertain", "attempt": 2.0},
		},
		"artifacts": map[string]any{art: map[string]any{"status": "included", "path": "artifacts/" + art}},
		"hxd":       map[string]any{"writer": "hxd", "include_payloads": true, "include_artifacts": true, "redaction_rules": 0.0},
	}
	members := b.manifest["members"].(map[string]any)
	delete(b.manifest, "members")
	require.Equal(t, want, b.manifest)

	// members: every member but manifest.json, with matching hashes and sizes.
	require.ElementsMatch(t, []string{"records.jsonl", "artifacts/" + art}, exSortedKeys(members))
	for name, d := range members {
		d := d.(map[string]any)
		require.Equal(t, exSHA(b.members[name]), d["sha256"], name)
		require.EqualValues(t, len(b.members[name]), d["size"], name)
	}
	// An empty run: no agent, no records.
	info = exInfo()
	info.Agent = nil
	a, _ = exBuild(t, info, &exSource{}, Policy{})
	b = exReadBundle(t, a)
	require.Nil(t, b.manifest["agent"])
	require.Equal(t, []any{}, b.manifest["unresolved_operations"])
	require.EqualValues(t, 0, b.manifest["record_count"])
	require.EqualValues(t, 0, b.manifest["last_sequence"])
	require.Empty(t, b.members["records.jsonl"])
	require.Equal(t, map[string]any{"sha256": exSHA(nil), "size": 0.0}, b.manifest["members"].(map[string]any)["records.jsonl"])
}

func TestExportPayloadsAndCapture(t *testing.T) {
	t.Parallel()
	src := &exSource{records: exRecords(
		"run.started", `{"message":"hi","config":{"timeout":300.0}}`,
		"model.started", `{"headers":{"Authorization":"Bearer x"}}`,
		"model.response", `{"text":"drop me"}`,
		"tool.returned", `{"content":"x","is_error":false,"tool_call_id":"c"}`,
		"checkpoint", `null`,
	)}
	p := Policy{IncludePayloads: true, Redact: []Rule{{Kinds: []string{"model.response"}, Action: "omit"}}}
	a, _ := exBuild(t, exInfo(), src, p)
	b := exReadBundle(t, a)
	var captures []string
	for _, r := range b.records {
		captures = append(captures, r["capture"].(string))
	}
	require.Equal(t, []string{"present", "redacted", "omitted", "present", "omitted"}, captures)
	require.Contains(t, string(b.lines[0]), `"payload":{"config":{"timeout":300.0},"message":"hi"}`)
	require.Contains(t, string(b.lines[1]), `"payload":{"headers":{"Authorization":"[REDACTED]"}}`)
	require.Contains(t, string(b.lines[2]), `"payload":null`)
	for _, l := range b.lines {
		exRequireCanonical(t, l)
	}
	// The stored records are untouched.
	require.JSONEq(t, `{"headers":{"Authorization":"Bearer x"}}`, string(src.records[1].Payload))
}

func TestExportArtifacts(t *testing.T) {
	t.Parallel()
	good1, good2 := []byte("first artifact"), []byte("second artifact")
	k1, k2 := exSHA(good1), exSHA(good2)
	missing := exSHA([]byte("missing"))
	corrupt := exSHA([]byte("original"))
	broken := exSHA([]byte("broken read"))
	uppercase := strings.ToUpper(exSHA([]byte("upper")))
	tooLong := exSHA([]byte("long")) + "a"
	payload := fmt.Sprintf(`{"a":"artifact://%s","b":["artifact://%s","artifact://%s"],"c":"x artifact://%s y","d":"artifact://%s","e":"artifact://%s","f":"artifact://%s","g":"artifact://%s"}`,
		k2, k1, missing, corrupt, broken, uppercase, tooLong, k1)
	artifacts := map[string][]byte{k1: good1, k2: good2, corrupt: []byte("tampered"), broken: []byte("broken read")}
	recs := exRecords("run.started", `{}`, "tool.returned", payload)

	t.Run("included", func(t *testing.T) {
		t.Parallel()
		src := &exSource{records: recs, artifacts: artifacts, readFail: map[string]bool{broken: true}}
		a, _ := exBuild(t, exInfo(), src, Policy{IncludePayloads: true, IncludeArtifacts: true})
		b := exReadBundle(t, a)
		first, second := "artifacts/"+min(k1, k2), "artifacts/"+max(k1, k2)
		require.Equal(t, []string{"records.jsonl", first, second, "manifest.json"}, b.names)
		require.Equal(t, good1, b.members["artifacts/"+k1])
		require.Equal(t, good2, b.members["artifacts/"+k2])
		require.Equal(t, map[string]any{
			k1:      map[string]any{"status": "included", "path": "artifacts/" + k1},
			k2:      map[string]any{"status": "included", "path": "artifacts/" + k2},
			missing: map[string]any{"status": "missing", "reason": "artifact_unavailable"},
			broken:  map[string]any{"status": "missing", "reason": "artifact_unavailable"},
			corrupt: map[string]any{"status": "corrupt", "reason": "artifact_checksum"},
		}, b.manifest["artifacts"])
		require.NotContains(t, string(b.members["manifest.json"]), "/var/secret/path")
		require.NotContains(t, string(b.members["manifest.json"]), "disk error")
	})
	t.Run("omitted by policy", func(t *testing.T) {
		t.Parallel()
		src := &exSource{records: recs, artifacts: artifacts}
		a, _ := exBuild(t, exInfo(), src, Policy{IncludePayloads: true})
		b := exReadBundle(t, a)
		require.Equal(t, []string{"records.jsonl", "manifest.json"}, b.names)
		arts := b.manifest["artifacts"].(map[string]any)
		require.ElementsMatch(t, []string{k1, k2, missing, corrupt, broken}, exSortedKeys(arts))
		for _, d := range arts {
			require.Equal(t, map[string]any{"status": "omitted", "reason": "export_policy"}, d)
		}
	})
	t.Run("redacted payloads drop references", func(t *testing.T) {
		t.Parallel()
		src := &exSource{records: recs, artifacts: artifacts}
		p := Policy{IncludePayloads: true, IncludeArtifacts: true, Redact: []Rule{{Action: "omit"}}}
		a, _ := exBuild(t, exInfo(), src, p)
		b := exReadBundle(t, a)
		require.Equal(t, []string{"records.jsonl", "manifest.json"}, b.names)
		require.Equal(t, map[string]any{}, b.manifest["artifacts"])
	})
	t.Run("pointer redaction drops one reference", func(t *testing.T) {
		t.Parallel()
		src := &exSource{records: exRecords("tool.returned", `{"a":"artifact://`+k1+`","b":"artifact://`+k2+`"}`), artifacts: artifacts}
		p := Policy{IncludePayloads: true, IncludeArtifacts: true, Redact: []Rule{{Pointer: "/a", Action: "omit"}}}
		a, _ := exBuild(t, exInfo(), src, p)
		b := exReadBundle(t, a)
		require.Equal(t, []string{"records.jsonl", "artifacts/" + k2, "manifest.json"}, b.names)
	})
}

func TestExportCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	_, err := Build(ctx, exInfo(), &exSource{records: exRecords("run.started", `{}`)}, Policy{}, dir)
	require.ErrorIs(t, err, context.Canceled)
	exRequireEmptyDir(t, dir)
}

func TestExportRejectsInconsistentJournal(t *testing.T) {
	t.Parallel()
	gap := exRecords("run.started", `{}`, "checkpoint", `{}`)
	gap[1].Seq = 3
	other := exRecords("run.started", `{}`)
	other[0].RunID = "run-2"
	badPayload := exRecords("run.started", `{"a":`)
	tests := []struct {
		name    string
		recs    []journal.Record
		policy  Policy
		wantErr string
	}{
		{name: "seq gap", recs: gap, wantErr: "record 2 has seq 3"},
		{name: "other run", recs: other, wantErr: "belongs to another run"},
		{name: "invalid payload", recs: badPayload, policy: Policy{IncludePayloads: true}, wantErr: "encode record seq 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			_, err := Build(context.Background(), exInfo(), &exSource{records: tt.recs}, tt.policy, dir)
			require.ErrorContains(t, err, tt.wantErr)
			exRequireEmptyDir(t, dir)
		})
	}
}

func TestExportInvalidPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := Build(context.Background(), exInfo(), &exSource{}, Policy{IncludeArtifacts: true}, dir)
	require.ErrorIs(t, err, ErrInvalidPolicy)
	exRequireEmptyDir(t, dir)
}

func exRequireEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries)
}

func TestExportLimits(t *testing.T) {
	t.Parallel()
	art := []byte(strings.Repeat("A", 1000))
	key := exSHA(art)
	recs := exRecords(
		"run.started", `{"message":"hi"}`,
		"tool.returned", `{"content":"artifact://`+key+`"}`,
		"checkpoint", `{"status":"completed"}`,
	)
	newSrc := func() *exSource { return &exSource{records: recs, artifacts: map[string][]byte{key: art}} }
	full := Policy{IncludePayloads: true, IncludeArtifacts: true}

	// Measure the unconstrained bundle to aim limits at its exact edges.
	a, _ := exBuild(t, exInfo(), newSrc(), full)
	b := exReadBundle(t, a)
	var memberBytes, largest int64
	for _, data := range b.members {
		memberBytes += int64(len(data))
		largest = max(largest, int64(len(data)))
	}
	withLimits := func(p Policy, l Limits) Policy { p.Limits = l; return p }

	tests := []struct {
		name    string
		policy  Policy
		src     *exSource
		wantMsg string // "" means the export succeeds
	}{
		{name: "record limit", policy: withLimits(full, Limits{MaxRecords: 2}), wantMsg: MsgRecordLimit},
		{name: "record limit exact", policy: withLimits(full, Limits{MaxRecords: 3})},
		{name: "record limit before member limit", policy: withLimits(full, Limits{MaxRecords: 2, MaxMemberBytes: 10}), wantMsg: MsgRecordLimit},
		{name: "record limit through a wrapping source", policy: withLimits(full, Limits{MaxRecords: 1}),
			src: &exSource{records: recs, wrapErr: true}, wantMsg: MsgRecordLimit},
		{name: "member count", policy: withLimits(full, Limits{MaxMembers: 2}), wantMsg: MsgMemberLimit},
		{name: "member count exact", policy: withLimits(full, Limits{MaxMembers: 3})},
		{name: "member count without artifacts", policy: withLimits(Policy{}, Limits{MaxMembers: 1}), wantMsg: MsgMemberLimit},
		{name: "member bytes", policy: withLimits(full, Limits{MaxMemberBytes: largest - 1}), wantMsg: MsgMemberLimit},
		{name: "member bytes exact", policy: withLimits(full, Limits{MaxMemberBytes: largest})},
		{name: "records member bytes", policy: withLimits(Policy{IncludePayloads: true}, Limits{MaxMemberBytes: 100}), wantMsg: MsgMemberLimit},
		{name: "artifact member bytes", policy: withLimits(full, Limits{MaxMemberBytes: int64(len(art)) - 1}), wantMsg: MsgMemberLimit},
		{name: "member bytes before byte limit", policy: withLimits(full, Limits{MaxBytes: 100, MaxMemberBytes: int64(len(art)) - 1}), wantMsg: MsgMemberLimit},
		{name: "total member bytes", policy: withLimits(full, Limits{MaxBytes: memberBytes - 1}), wantMsg: MsgByteLimit},
		{name: "zip size", policy: withLimits(full, Limits{MaxBytes: a.Size() - 1}), wantMsg: MsgByteLimit},
		{name: "zip size exact", policy: withLimits(full, Limits{MaxBytes: a.Size()})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := tt.src
			if src == nil {
				src = newSrc()
			}
			dir := t.TempDir()
			info := exInfo()
			got, err := Build(context.Background(), info, src, tt.policy, dir)
			if tt.wantMsg == "" {
				require.NoError(t, err)
				require.NoError(t, got.Close())
				exRequireEmptyDir(t, dir)
				return
			}
			require.ErrorIs(t, err, ErrLimitExceeded)
			var le *LimitError
			require.ErrorAs(t, err, &le)
			require.Equal(t, tt.wantMsg, le.Message)
			require.Equal(t, tt.wantMsg, err.Error())
			require.Nil(t, got)
			exRequireEmptyDir(t, dir)
		})
	}
}

// TestExportZipStructure checks the raw ZIP bytes: STORED members with
// CRC-32 and sizes in the local headers, no data descriptors, no extra
// fields, Unix 0600 attributes, members in format order, no comment.
func TestExportZipStructure(t *testing.T) {
	t.Parallel()
	arts := map[string][]byte{}
	var refs []string
	for i := range 3 {
		data := []byte(fmt.Sprintf("artifact %d", i))
		arts[exSHA(data)] = data
		refs = append(refs, `"artifact://`+exSHA(data)+`"`)
	}
	src := &exSource{records: exRecords("run.started", `{"files":[`+strings.Join(refs, ",")+`]}`, "checkpoint", `{}`), artifacts: arts}
	a, _ := exBuild(t, exInfo(), src, Policy{IncludePayloads: true, IncludeArtifacts: true})
	b := exReadBundle(t, a)

	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range arts {
			if !yield(k) {
				return
			}
		}
	})
	want := []string{"records.jsonl"}
	for _, k := range keys {
		want = append(want, "artifacts/"+k)
	}
	want = append(want, "manifest.json")
	require.Equal(t, want, b.names)

	for _, f := range b.files {
		require.Equal(t, zip.Store, f.Method, f.Name)
		require.Zero(t, f.Flags, f.Name)
		require.Empty(t, f.Extra, f.Name)
		require.Empty(t, f.Comment, f.Name)
		require.Equal(t, uint16(3<<8|20), f.CreatorVersion, f.Name)
		require.Equal(t, uint16(20), f.ReaderVersion, f.Name)
		require.Equal(t, uint32(0o600<<16), f.ExternalAttrs, f.Name)
		require.Equal(t, os.FileMode(0o600), f.Mode(), f.Name)
		require.Equal(t, exTime.Truncate(2*time.Second), f.Modified.UTC(), f.Name)
		require.Equal(t, crc32.ChecksumIEEE(b.members[f.Name]), f.CRC32, f.Name)
	}

	// Walk the local headers: back to back, each followed by its data.
	le := binary.LittleEndian
	raw, off := b.raw, 0
	for _, name := range want {
		require.Equal(t, uint32(0x04034b50), le.Uint32(raw[off:]), name)
		require.Equal(t, uint16(20), le.Uint16(raw[off+4:]), name)
		require.Zero(t, le.Uint16(raw[off+6:])&0x8, "data descriptor flag on %s", name)
		require.Zero(t, le.Uint16(raw[off+6:]), name)
		require.Zero(t, le.Uint16(raw[off+8:]), "method of %s", name)
		data := b.members[name]
		require.Equal(t, crc32.ChecksumIEEE(data), le.Uint32(raw[off+14:]), name)
		require.Equal(t, uint32(len(data)), le.Uint32(raw[off+18:]), name)
		require.Equal(t, uint32(len(data)), le.Uint32(raw[off+22:]), name)
		nameLen, extraLen := int(le.Uint16(raw[off+26:])), int(le.Uint16(raw[off+28:]))
		require.Zero(t, extraLen, name)
		require.Equal(t, name, string(raw[off+30:off+30+nameLen]))
		off += 30 + nameLen
		require.Equal(t, data, raw[off:off+len(data)], name)
		off += len(data)
	}
	// Central directory then the end record, which has no comment.
	require.Equal(t, uint32(0x02014b50), le.Uint32(raw[off:]))
	end := len(raw) - 22
	require.Equal(t, uint32(0x06054b50), le.Uint32(raw[end:]))
	require.Equal(t, uint16(len(want)), le.Uint16(raw[end+10:]))
	require.Equal(t, uint32(off), le.Uint32(raw[end+16:]))
	require.Zero(t, le.Uint16(raw[end+20:]))
	require.Equal(t, len(raw), exArchiveSize(b))
}

// exArchiveSize is the size of a ZIP holding b's members, STORED, without
// extra fields, data descriptors or comments: 30 bytes of local header
// and 46 of central directory entry per member besides its name (twice)
// and data, and the 22-byte end record.
func exArchiveSize(b exBundle) int {
	n := 22
	for _, name := range b.names {
		n += 30 + 46 + 2*len(name) + len(b.members[name])
	}
	return n
}

func TestDOSDateTime(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   time.Time
		want time.Time
	}{
		{name: "utc", in: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), want: time.Date(2025, 3, 4, 5, 6, 6, 0, time.UTC)},
		{name: "zone converted to utc", in: time.Date(2025, 3, 4, 5, 6, 8, 0, time.FixedZone("x", 3600)), want: time.Date(2025, 3, 4, 4, 6, 8, 0, time.UTC)},
		{name: "before 1980 clamps", in: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), want: time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)},
		{name: "after 2107 clamps", in: time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), want: time.Date(2107, 12, 31, 23, 59, 58, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			date, tm := dosDateTime(tt.in)
			got := time.Date(int(date>>9)+1980, time.Month(date>>5&0xf), int(date&0x1f),
				int(tm>>11), int(tm>>5&0x3f), int(tm&0x1f)*2, 0, time.UTC)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestScanArtifactRefs(t *testing.T) {
	t.Parallel()
	k := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		text string
		want []string
	}{
		{name: "plain", text: `"artifact://` + k + `"`, want: []string{k}},
		{name: "at end", text: `artifact://` + k, want: []string{k}},
		{name: "followed by hex", text: `artifact://` + k + `0`},
		{name: "followed by uppercase hex", text: `artifact://` + k + `A`, want: []string{k}},
		{name: "too short", text: `artifact://` + k[:63] + `"`},
		{name: "uppercase", text: `artifact://` + strings.ToUpper(k)},
		{name: "two and repeated", text: `artifact://` + k + ` artifact://` + k + ` artifact://` + strings.Repeat("0", 64), want: []string{k, k, strings.Repeat("0", 64)}},
		{name: "prefix inside prefix", text: `artifact://artifact://` + k, want: []string{k}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			exportScanArtifactRefs([]byte(tt.text), func(key string) { got = append(got, key) })
			require.Equal(t, tt.want, got)
		})
	}
}

// exGenSource generates n tool.returned records with a text of about
// recordSize bytes on the fly, so that the test's own memory does not grow
// with the journal. Every secretEvery-th payload (0: none) carries an
// api_key, which sends it through the full redaction pass.
type exGenSource struct {
	n           int
	recordSize  int
	secretEvery int
}

func (g exGenSource) Records(ctx context.Context, fn func(journal.Record) error) error {
	const prose = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.\n" +
		"Ut enim ad minim veniam, quis \"nostrud\" exercitation ullamco laboris nisi ut aliquip ex ea commodo.\n" +
		"Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. "
	filler := strings.Repeat(prose, g.recordSize/len(prose)+1)[:g.recordSize]
	quoted, err := json.Marshal(filler)
	if err != nil {
		return err
	}
	key := exRunID + ":1:call-1"
	var payload []byte
	for i := 1; i <= g.n; i++ {
		payload = append(payload[:0], `{"tool_call_id": "call-`...)
		payload = strconv.AppendInt(payload, int64(i), 10)
		payload = append(payload, `", "is_error": false, "content": [{"type": "text", "text": `...)
		payload = append(payload, quoted...)
		payload = append(payload, `}], "usage": {"input_tokens": `...)
		payload = strconv.AppendInt(payload, int64(i), 10)
		payload = append(payload, `, "output_tokens": 12, "cost": 0.25}`...)
		if g.secretEvery > 0 && i%g.secretEvery == 0 {
			payload = append(payload, `, "api_key": "sk-live"`...)
		}
		payload = append(payload, '}')
		r := journal.Record{
			Version: 1, ID: "id-" + strconv.Itoa(i), Kind: journal.KindToolReturned,
			RecordedAt: "2025-03-04T05:06:07.891000+00:00", SessionID: exSessionID, RunID: exRunID,
			StepID: "1", AttemptID: "1", ExecutionKey: &key, Payload: payload, Seq: int64(i),
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

func (g exGenSource) OpenArtifact(ctx context.Context, key string) (io.ReadCloser, error) {
	return nil, errors.New("no artifacts")
}

// TestExportMemory exports about 50 MiB and checks that the heap stays far
// below the bundle size: records are spooled, not buffered.
func TestExportMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("exports 50 MiB")
	}
	src := exGenSource{n: 12800, recordSize: 4000, secretEvery: 2}
	p := Policy{IncludePayloads: true, Limits: exBigLimits}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := before.HeapInuse
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
			}
		}
	})
	a, err := Build(context.Background(), exInfo(), src, p, t.TempDir())
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	defer func() { require.NoError(t, a.Close()) }()
	n, err := a.WriteTo(io.Discard)
	require.NoError(t, err)
	require.Equal(t, a.Size(), n)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	growth := int64(peak) - int64(before.HeapInuse)
	t.Logf("bundle %.1f MiB, heap in use before %.1f MiB, peak %.1f MiB (+%.1f MiB), after %.1f MiB, total allocated %.0f MiB",
		exMiB(a.Size()), exMiB(int64(before.HeapInuse)), exMiB(int64(peak)), exMiB(growth), exMiB(int64(after.HeapInuse)),
		exMiB(int64(after.TotalAlloc-before.TotalAlloc)))
	require.Greater(t, a.Size(), int64(48<<20))
	require.Less(t, growth, int64(16<<20))
}

func exMiB(n int64) float64 { return float64(n) / (1 << 20) }

// exBenchSource gives about 60 MiB of records with payloads; one in 16
// carries a credential.
var exBenchSource = exGenSource{n: 14000, recordSize: 4000, secretEvery: 16}

// exBigLimits let records.jsonl alone reach 64 MiB.
var exBigLimits = Limits{MaxMemberBytes: 64 << 20}

// BenchmarkExport exports about 60 MiB (Build, then WriteTo and Close).
// x-baseline is the export's throughput relative to SHA-256 + CRC-32 over
// the bundle's bytes (exHashBundle, BenchmarkExportBaseline's loop),
// measured in alternation so that both see the same machine load: the
// median of 7 pairs. cpu-ms/op is the process's CPU time (user and
// system, all goroutines) per export, which other load hardly changes.
func BenchmarkExport(b *testing.B) {
	dir := b.TempDir()
	p := Policy{IncludePayloads: true, Limits: exBigLimits}
	export := func() int64 {
		a, err := Build(context.Background(), exInfo(), exBenchSource, p, dir)
		if err != nil {
			b.Fatal(err)
		}
		// A plain writer: io.Discard's ReadFrom would force 8 KiB reads.
		if _, err := a.WriteTo(struct{ io.Writer }{io.Discard}); err != nil {
			b.Fatal(err)
		}
		size := a.Size()
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
		return size
	}
	ratio := exBaselineRatio(b, export)

	var size int64
	cpu0 := exCPUTime()
	b.ResetTimer()
	for b.Loop() {
		size = export()
		b.SetBytes(size)
	}
	b.StopTimer()
	b.ReportMetric(float64(exCPUTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	b.ReportMetric(exMiB(size), "MiB/bundle")
	b.ReportMetric(ratio, "x-baseline")
}

// exBaselineRatio is the median of 7 alternated pairs of the baseline's
// time (exHashBundle over the benchmark's bundle) over export's. The
// bundle's bytes are garbage once it returns, before the timed loop.
func exBaselineRatio(b *testing.B, export func() int64) float64 {
	data := exBenchBundle(b)
	var ratios []float64
	for range 7 {
		start := time.Now()
		export()
		te := time.Since(start)
		start = time.Now()
		exHashBundle(data)
		ratios = append(ratios, float64(time.Since(start))/float64(te))
	}
	slices.Sort(ratios)
	return ratios[len(ratios)/2]
}

// exCPUTime is the process's user and system CPU time so far.
func exCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// exBenchBundle returns the bytes of the benchmark's bundle.
func exBenchBundle(b *testing.B) []byte {
	a, err := Build(context.Background(), exInfo(), exBenchSource, Policy{IncludePayloads: true, Limits: exBigLimits}, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, a.Size())
	_, err = a.ReaderAt().ReadAt(data, 0)
	require.NoError(b, err)
	require.NoError(b, a.Close())
	return data
}

// exHashBundle is the baseline: SHA-256 and CRC-32 over data, in chunks.
func exHashBundle(data []byte) {
	h := sha256.New()
	c := crc32.NewIEEE()
	for chunk := range slices.Chunk(data, recordJobBytes) {
		h.Write(chunk)
		c.Write(chunk)
	}
	_ = h.Sum(nil)
	_ = c.Sum32()
}

// BenchmarkExportBaseline hashes as many bytes as BenchmarkExport writes
// with SHA-256 and CRC-32, the minimum any exporter must do.
func BenchmarkExportBaseline(b *testing.B) {
	data := exBenchBundle(b)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		exHashBundle(data)
	}
}

// exCompleteRun is a synthetic journal of a finished run with one model
// call and one tool call, whose last checkpoint matches info.
func exCompleteRun(artifact []byte) []journal.Record {
	key := exSHA(artifact)
	return exRecords(
		"run.started", `{"message":"Check invoices","initial_messages":[],"agent":{"name":"invoice-analyst","version":"v1"},"config":{"timeout":300.0}}`,
		"checkpoint", `{"phase":"prepare_model","status":"running","error":null,"extensions":{},"tools":[]}`,
		"model.started", `{"model":"m","messages":[{"role":"user","content":"Check invoices"}],"system":"s","tools":[],"max_tokens":100,"temperature":0,"cache":null}`,
		"model.response", `{"text":"","thinking":"","tool_calls":[{"id":"call-1","name":"overdue_balance","input":{"account":"a"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}`,
		"model.processed", `{"text":"","thinking":"","tool_calls":[{"id":"call-1","name":"overdue_balance","input":{"account":"a"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}`,
		"model.completed", `{"text":"","thinking":"","tool_calls":[{"id":"call-1","name":"overdue_balance","input":{"account":"a"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4}}`,
		"tool.started", `{"call":{"id":"call-1","name":"overdue_balance","input":{"account":"a"}},"replay_policy":"safe"}`,
		"tool.dispatched", `{"call":{"id":"call-1","name":"overdue_balance","input":{"account":"a"}}}`,
		"tool.returned", `{"tool_call_id":"call-1","content":"see artifact://`+key+`","is_error":false}`,
		"tool.processed", `{"tool_call_id":"call-1","content":"see artifact://`+key+`","is_error":false}`,
		"checkpoint", `{"phase":"result","status":"completed","error":null,"extensions":{},"tools":[{"execution_key":"run-1:1:call-1","status":"completed","attempt":1}]}`,
	)
}

// TestExportVerifyRoundTrip checks that what Build writes, the verifier
// accepts: valid always, complete when nothing was withheld.
func TestExportVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	artifact := []byte("overdue: 1,234.00 EUR")
	key := exSHA(artifact)
	newSrc := func() *exSource {
		return &exSource{records: exCompleteRun(artifact), artifacts: map[string][]byte{key: artifact}}
	}
	uncertain := exRecords("run.started", `{"message":"m"}`,
		"tool.started", `{"call":{"id":"call-1","name":"t","input":{}},"replay_policy":"manual"}`,
		"tool.dispatched", `{"call":{"id":"call-1","name":"t","input":{}}}`,
		"checkpoint", `{"phase":"tools","status":"awaiting_input","error":null,"extensions":{},"tools":[{"execution_key":"run-1:1:call-1","status":"uncertain","attempt":1}]}`,
	)
	tests := []struct {
		name       string
		src        *exSource
		info       func(*RunInfo)
		policy     Policy
		wantIssues []string
	}{
		{name: "complete", src: newSrc(), policy: Policy{IncludePayloads: true, IncludeArtifacts: true}},
		{name: "metadata only", src: newSrc(), policy: Policy{},
			wantIssues: []string{"payloads_omitted_or_redacted"}},
		{name: "artifacts omitted", src: newSrc(), policy: Policy{IncludePayloads: true},
			wantIssues: []string{"artifacts_unavailable"}},
		{name: "artifact missing", src: &exSource{records: exCompleteRun(artifact)}, policy: Policy{IncludePayloads: true, IncludeArtifacts: true},
			wantIssues: []string{"artifacts_unavailable"}},
		{name: "last checkpoint redacted", src: newSrc(),
			policy:     Policy{IncludePayloads: true, IncludeArtifacts: true, Redact: []Rule{{Kinds: []string{"checkpoint"}, Pointer: "/status", Action: "replace", Value: json.RawMessage(`"x"`)}}},
			wantIssues: []string{"payloads_omitted_or_redacted"}},
		{name: "tool result scrubbed", src: newSrc(),
			policy:     Policy{IncludePayloads: true, IncludeArtifacts: true, Redact: []Rule{{Kinds: []string{"tool.returned", "tool.processed"}, Pattern: `^see `, Replace: "ref "}}},
			wantIssues: []string{"payloads_omitted_or_redacted"}},
		{name: "unresolved operation", src: &exSource{records: uncertain}, policy: Policy{IncludePayloads: true},
			info: func(i *RunInfo) {
				i.Status, i.Phase = "awaiting_input", "tools"
				i.Unresolved = []UnresolvedOperation{{ExecutionKey: "run-1:1:call-1", Status: "uncertain", Attempt: 1}}
			},
			wantIssues: []string{"run_not_terminal_at_export", "unresolved_tool_outcome", "tool_attempt_outcome_unresolved"}},
		{name: "empty journal", src: &exSource{}, policy: Policy{IncludePayloads: true},
			wantIssues: []string{"initial_run_record_missing", "checkpoint_missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			info := exInfo()
			if tt.info != nil {
				tt.info(&info)
			}
			a, _ := exBuild(t, info, tt.src, tt.policy)
			report := Verify(a.ReaderAt(), a.Size(), tt.policy.EffectiveLimits())
			require.True(t, report.Valid, "issues: %v details: %+v", report.Issues, report.Details)
			require.Equal(t, len(tt.src.records), report.RecordCount)
			if tt.wantIssues == nil {
				require.True(t, report.Complete, "issues: %v", report.Issues)
				require.Empty(t, report.Issues)
				return
			}
			require.False(t, report.Complete)
			require.Equal(t, tt.wantIssues, report.Issues)
		})
	}
}

// TestVerifyExportWithUncataloguedReference is issue 18's repro on a real
// export: a valid bundle with one catalogued artifact, one record payload
// given "artifact://" + 64×"e", the member digests re-sealed. The
// verifier must report the catalog mismatch.
func TestVerifyExportWithUncataloguedReference(t *testing.T) {
	t.Parallel()
	artifact := []byte("overdue: 1,234.00 EUR")
	key := exSHA(artifact)
	src := &exSource{records: exCompleteRun(artifact), artifacts: map[string][]byte{key: artifact}}
	a, _ := exBuild(t, exInfo(), src, Policy{IncludePayloads: true, IncludeArtifacts: true})
	b := exReadBundle(t, a)
	require.True(t, Verify(bytes.NewReader(b.raw), int64(len(b.raw)), DefaultLimits).Valid)
	var catalog map[string]any
	require.NoError(t, json.Unmarshal(b.members[memberManifest], &struct {
		Artifacts *map[string]any `json:"artifacts"`
	}{&catalog}))
	require.Equal(t, []string{key}, exSortedKeys(catalog))

	uncatalogued := "artifact://" + strings.Repeat("e", 64)
	lines := slices.Clone(b.lines)
	lines[0] = bytes.Replace(lines[0], []byte(`"Check invoices"`), []byte(`"Check invoices, see `+uncatalogued+`"`), 1)
	require.NotEqual(t, b.lines[0], lines[0])
	records := append(bytes.Join(lines, []byte("\n")), '\n')

	// Re-seal: the records member's digest and size in the manifest.
	dec := json.NewDecoder(bytes.NewReader(b.members[memberManifest]))
	dec.UseNumber()
	var manifest map[string]any
	require.NoError(t, dec.Decode(&manifest))
	manifest["members"].(map[string]any)[memberRecords] = map[string]any{"sha256": sha(records), "size": len(records)}
	fs := []file{{memberRecords, records}, {artifactPrefix + key, b.members[artifactPrefix+key]}, {memberManifest, marshal(t, manifest)}}
	data := zipStored(t, fs)

	r := Verify(bytes.NewReader(data), int64(len(data)), DefaultLimits)
	require.False(t, r.Valid, "%+v", r)
	require.Equal(t, []string{"Artifact reference/catalog mismatch"}, r.Issues)
	require.Equal(t, memberManifest, r.Details[0].Member)
	require.Contains(t, r.Details[0].Message, uncatalogued)
}
