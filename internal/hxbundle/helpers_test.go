package hxbundle

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Test bundles are built in the test from record maps, like the
// reference's test helper: the manifest's members (sha256, size) are
// recomputed from the member bytes after every edit, so each case is a
// small edit of a valid base bundle. Writing uses archive/zip, every
// member STORED, no data descriptors, manifest.json last.

const (
	tRunID     = "8f0c2a6e-3b7d-4c1e-9a55-0d2f4b6c8e10"
	tSessionID = "5a1b9c3d-7e2f-4a60-8b14-c3d5e7f90a21"
	tToolKey   = tRunID + ":1:call_1"
	tTime      = "2025-01-02T03:04:05.123456+00:00"
)

// tArtifact is the artifact the base bundle's tool result references.
var tArtifact = []byte("invoice_id,amount_due,days_overdue\nINV-1001,1250.00,45\nINV-1002,380.50,12\n")

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// file is one archive member.
type file struct {
	name string
	data []byte
}

// bundle is a bundle under construction.
type bundle struct {
	manifest map[string]any
	records  []map[string]any
	// lines, when set, replace the rendered records (one element per line,
	// no line breaks); recordsRaw replaces records.jsonl entirely.
	lines      [][]byte
	recordsRaw []byte
	artifacts  map[string][]byte // member artifacts/<key>
	extra      []file            // further members, hashed like the others
	// keepMembers keeps manifest["members"] as set instead of recomputing.
	keepMembers bool
	// editMembers edits the recomputed manifest members map.
	editMembers func(members map[string]any)
	// editManifest edits the rendered manifest bytes (not hashed).
	editManifest func([]byte) []byte
	// editFiles edits the members after the manifest is rendered (no
	// rehash: an "edited without rehash" tamper).
	editFiles func([]file) []file
}

func rec(seq int, kind, step, attempt string, key any, payload any) map[string]any {
	capture := "present"
	if payload == nil {
		capture = "omitted"
	}
	return map[string]any{
		"version":       1,
		"id":            fmt.Sprintf("00000000-0000-4000-8000-%012d", seq),
		"kind":          kind,
		"recorded_at":   tTime,
		"session_id":    tSessionID,
		"run_id":        tRunID,
		"step_id":       step,
		"attempt_id":    attempt,
		"execution_key": key,
		"payload":       deepCopy(payload),
		"capture":       capture,
		"seq":           seq,
	}
}

func event(typ string, data any, cursor int) map[string]any {
	return map[string]any{
		"type": typ, "data": data, "session_id": tSessionID, "run_id": tRunID,
		"step_id": "1", "attempt_id": "1", "event_id": fmt.Sprintf("evt-%d", cursor), "cursor": fmt.Sprint(cursor),
	}
}

func usage() map[string]any {
	return map[string]any{"input_tokens": 120, "output_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

// baseBundle is a valid, complete bundle: a completed run with one model
// turn calling one tool whose result references an included artifact,
// then a final turn.
func baseBundle() *bundle {
	art := sha(tArtifact)
	call := map[string]any{"id": "call_1", "name": "overdue_balance", "input": map[string]any{"account": "ACME-42"}}
	result := map[string]any{"tool_call_id": "call_1", "content": "See artifact://" + art + " for the rows.", "is_error": false}
	resp1 := map[string]any{"text": "", "thinking": nil, "tool_calls": []any{call}, "stop_reason": "tool_use", "usage": usage()}
	resp2 := map[string]any{"text": "ACME-42 owes 1630.50.", "thinking": nil, "tool_calls": []any{}, "stop_reason": "end_turn", "usage": usage()}
	request := map[string]any{"model": "gpt-4o-mini", "messages": []any{}, "system": "You analyse invoices.", "tools": []any{},
		"max_tokens": 4096, "temperature": json.Number("0.0"), "cache": nil}
	cp := func(phase, status string, tools []any) map[string]any {
		return map[string]any{"phase": phase, "status": status, "error": nil, "extensions": map[string]any{}, "tools": tools}
	}
	toolDone := []any{map[string]any{"execution_key": tToolKey, "status": "completed", "attempt": 1}}
	runResult := map[string]any{
		"session_id": tSessionID, "run_id": tRunID, "output": "ACME-42 owes 1630.50.", "status": "completed",
		"stop_reason": "end_turn", "usage": usage(), "error": nil, "pending": []any{}, "usage_incomplete": false,
	}
	records := []map[string]any{
		rec(1, "run.started", "0", "0", nil, map[string]any{
			"message": "Which invoices of ACME-42 are overdue?", "initial_messages": []any{},
			"agent":  map[string]any{"name": "invoice-analyst", "version": "v1"},
			"config": map[string]any{"model": "gpt-4o-mini", "timeout": json.Number("300.0")},
		}),
		rec(2, "checkpoint", "0", "0", nil, cp("prepare_model", "running", []any{})),
		rec(3, "model.started", "1", "1", nil, request),
		rec(4, "model.response", "1", "1", nil, resp1),
		rec(5, "model.processed", "1", "1", nil, resp1),
		rec(6, "model.completed", "1", "1", nil, resp1),
		rec(7, "checkpoint", "1", "1", nil, cp("prepare_tools", "running", []any{})),
		rec(8, "event", "1", "1", nil, event("tool_call_start", call, 1)),
		rec(9, "tool.started", "1", "1", tToolKey, map[string]any{"call": call, "replay_policy": "safe"}),
		rec(10, "tool.dispatched", "1", "1", tToolKey, map[string]any{"call": call}),
		rec(11, "tool.returned", "1", "1", tToolKey, result),
		rec(12, "tool.processed", "1", "1", tToolKey, result),
		rec(13, "checkpoint", "1", "1", nil, cp("prepare_model", "running", toolDone)),
		rec(14, "event", "1", "1", nil, event("tool_result", result, 2)),
		rec(15, "model.started", "2", "1", nil, request),
		rec(16, "model.response", "2", "1", nil, resp2),
		rec(17, "model.processed", "2", "1", nil, resp2),
		rec(18, "model.completed", "2", "1", nil, resp2),
		rec(19, "event", "2", "1", nil, event("text_delta", "ACME-42 owes 1630.50.", 3)),
		rec(20, "event", "2", "1", nil, event("run_result", runResult, 4)),
		rec(21, "checkpoint", "2", "1", nil, cp("result", "completed", toolDone)),
	}
	return &bundle{
		manifest: map[string]any{
			"format": "harness-x.incident", "version": 1, "created_at": tTime,
			"run_id": tRunID, "session_id": tSessionID, "status": "completed", "phase": "result",
			"agent":       map[string]any{"name": "invoice-analyst", "version": "v1"},
			"sdk_version": "hxd-test", "python_version": "n/a",
			"record_count": len(records), "last_sequence": len(records),
			"unresolved_operations": []any{},
			"artifacts":             map[string]any{art: map[string]any{"status": "included", "path": "artifacts/" + art}},
		},
		records:   records,
		artifacts: map[string][]byte{art: tArtifact},
	}
}

// smallBundle is a valid, complete bundle of a few small records (for
// fuzz seeds): one model turn whose response references an artifact.
func smallBundle() *bundle {
	resp := map[string]any{"text": "see artifact://" + artKey, "tool_calls": []any{}, "stop_reason": "end_turn"}
	records := []map[string]any{
		rec(1, "run.started", "0", "0", nil, map[string]any{"message": "hi"}),
		rec(2, "model.started", "1", "1", nil, map[string]any{}),
		rec(3, "model.response", "1", "1", nil, resp),
		rec(4, "model.processed", "1", "1", nil, resp),
		rec(5, "model.completed", "1", "1", nil, resp),
		rec(6, "event", "1", "1", nil, event("text_delta", "hi", 1)),
		rec(7, "checkpoint", "1", "1", nil, map[string]any{"phase": "result", "status": "completed", "error": nil, "extensions": map[string]any{}, "tools": []any{}}),
	}
	b := baseBundle()
	b.records = records
	b.renumber()
	return b
}

// metadataOnly turns b into a default (metadata-only) export: every
// payload null and omitted, so no artifact is referenced.
func (b *bundle) metadataOnly() *bundle {
	for _, r := range b.records {
		r["payload"] = nil
		r["capture"] = "omitted"
	}
	b.manifest["artifacts"] = map[string]any{}
	b.artifacts = nil
	return b
}

// renumber sets seq 1..N (and fresh ids) and the manifest counts after records were
// added or removed.
func (b *bundle) renumber() *bundle {
	for i, r := range b.records {
		r["seq"] = i + 1
		r["id"] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)
	}
	b.manifest["record_count"] = len(b.records)
	b.manifest["last_sequence"] = len(b.records)
	return b
}

// last returns the last record of the kind.
func (b *bundle) last(kind string) map[string]any {
	for i := len(b.records) - 1; i >= 0; i-- {
		if b.records[i]["kind"] == kind {
			return b.records[i]
		}
	}
	panic("no record of kind " + kind)
}

// marshal is JSON without HTML escaping (map keys sorted, no spaces).
func marshal(_ testing.TB, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// files renders the members: records.jsonl, artifacts ascending, extra
// members, then manifest.json with members recomputed.
func (b *bundle) files(t testing.TB) []file {
	t.Helper()
	var records []byte
	switch {
	case b.recordsRaw != nil:
		records = b.recordsRaw
	case b.lines != nil:
		for _, l := range b.lines {
			records = append(append(records, l...), '\n')
		}
	default:
		records = []byte{}
		for _, r := range b.records {
			records = append(append(records, marshal(t, r)...), '\n')
		}
	}
	fs := []file{{memberRecords, records}}
	for _, k := range slices.Sorted(maps.Keys(b.artifacts)) {
		fs = append(fs, file{artifactPrefix + k, b.artifacts[k]})
	}
	fs = append(fs, b.extra...)
	m := maps.Clone(b.manifest)
	if !b.keepMembers {
		members := map[string]any{}
		for _, f := range fs {
			members[f.name] = map[string]any{"sha256": sha(f.data), "size": len(f.data)}
		}
		if b.editMembers != nil {
			b.editMembers(members)
		}
		m["members"] = members
	}
	manifest := marshal(t, m)
	if b.editManifest != nil {
		manifest = b.editManifest(manifest)
	}
	fs = append(fs, file{memberManifest, manifest})
	if b.editFiles != nil {
		fs = b.editFiles(fs)
	}
	return fs
}

// zipStored writes the members with archive/zip, STORED, without data
// descriptors, like the reference's writer.
func zipStored(t testing.TB, fs []file) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range fs {
		h := &zip.FileHeader{
			Name: f.name, Method: zip.Store, CRC32: crc32.ChecksumIEEE(f.data),
			CompressedSize64: uint64(len(f.data)), UncompressedSize64: uint64(len(f.data)),
			CreatorVersion: 3<<8 | 20, ReaderVersion: 20, ExternalAttrs: 0o600 << 16,
		}
		fw, err := w.CreateRaw(h)
		require.NoError(t, err)
		_, err = fw.Write(f.data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// zipOpt changes how one member is written by zipWith.
type zipOpt struct {
	// deflate compresses the member (archive/zip adds a data descriptor).
	deflate bool
	// method, when set, is written as is with the data stored raw.
	method *uint16
	flags  uint16
	// extAttr replaces the external attributes.
	extAttr *uint32
	// name replaces the entry name (same data).
	name *string
}

// zipWith is zipStored with per-member options.
func zipWith(t testing.TB, fs []file, opts map[string]zipOpt) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range fs {
		o := opts[f.name]
		name := f.name
		if o.name != nil {
			name = *o.name
		}
		h := &zip.FileHeader{
			Name: name, Method: zip.Store, CRC32: crc32.ChecksumIEEE(f.data), Flags: o.flags,
			CompressedSize64: uint64(len(f.data)), UncompressedSize64: uint64(len(f.data)),
			CreatorVersion: 3<<8 | 20, ReaderVersion: 20, ExternalAttrs: 0o600 << 16,
		}
		if o.extAttr != nil {
			h.ExternalAttrs = *o.extAttr
		}
		if o.deflate {
			h.Method = zip.Deflate
			fw, err := w.CreateHeader(h)
			require.NoError(t, err)
			_, err = fw.Write(f.data)
			require.NoError(t, err)
			continue
		}
		if o.method != nil {
			h.Method = *o.method
		}
		fw, err := w.CreateRaw(h)
		require.NoError(t, err)
		_, err = fw.Write(f.data)
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// build renders and zips the bundle.
func (b *bundle) build(t testing.TB) []byte {
	t.Helper()
	return zipStored(t, b.files(t))
}

// verifyBytes runs Verify on an in-memory archive.
func verifyBytes(data []byte, limits Limits) Report {
	return Verify(bytes.NewReader(data), int64(len(data)), limits)
}

// zipEntryLayout locates one entry's headers in an archive built by
// zipStored (no extra fields, no comment).
type zipEntryLayout struct {
	name    string
	local   int // offset of the local header
	central int // offset of the central directory header
	data    int // offset of the data
	size    int // stored size
}

func layout(t testing.TB, data []byte) []zipEntryLayout {
	t.Helper()
	end := len(data) - sizeEnd
	require.Equal(t, uint32(sigEnd), binary.LittleEndian.Uint32(data[end:]))
	n := int(binary.LittleEndian.Uint16(data[end+10:]))
	cd := int(binary.LittleEndian.Uint32(data[end+16:]))
	var out []zipEntryLayout
	for i := 0; i < n; i++ {
		nameLen := int(binary.LittleEndian.Uint16(data[cd+28:]))
		extraLen := int(binary.LittleEndian.Uint16(data[cd+30:]))
		commentLen := int(binary.LittleEndian.Uint16(data[cd+32:]))
		local := int(binary.LittleEndian.Uint32(data[cd+42:]))
		lname := int(binary.LittleEndian.Uint16(data[local+26:]))
		lextra := int(binary.LittleEndian.Uint16(data[local+28:]))
		out = append(out, zipEntryLayout{
			name:    string(data[cd+46 : cd+46+nameLen]),
			local:   local,
			central: cd,
			data:    local + sizeLocal + lname + lextra,
			size:    int(binary.LittleEndian.Uint32(data[cd+20:])),
		})
		cd += 46 + nameLen + extraLen + commentLen
	}
	return out
}

// entry returns the layout of the named entry.
func entry(t testing.TB, data []byte, name string) zipEntryLayout {
	t.Helper()
	for _, e := range layout(t, data) {
		if e.name == name {
			return e
		}
	}
	t.Fatalf("no entry %q", name)
	return zipEntryLayout{}
}

func put16(b []byte, off int, v uint16) { binary.LittleEndian.PutUint16(b[off:], v) }
func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }

// replaceFile replaces a member's bytes (use in editFiles).
func replaceFile(fs []file, name string, data []byte) []file {
	for i := range fs {
		if fs[i].name == name {
			fs[i].data = data
		}
	}
	return fs
}

// deepCopy copies maps and slices so that records never share payloads.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = deepCopy(x)
		}
		return s
	}
	return v
}
