package hxbundle

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

// invalidCase is one tampered bundle and the single rejection message
// the reference (or, for the stricter rows, hxd) gives for it.
type invalidCase struct {
	name string
	// edit changes the base bundle before it is rendered.
	edit func(b *bundle)
	// build writes the archive (default: b.build).
	build func(t testing.TB, b *bundle) []byte
	// patch edits the archive bytes.
	patch  func(t testing.TB, data []byte) []byte
	limits Limits
	want   string
	// Expected detail fields, when set.
	member string
	seq    int
	why    string
}

func (c invalidCase) archive(t testing.TB) []byte {
	b := baseBundle()
	if c.edit != nil {
		c.edit(b)
	}
	var data []byte
	if c.build != nil {
		data = c.build(t, b)
	} else {
		data = b.build(t)
	}
	if c.patch != nil {
		data = c.patch(t, data)
	}
	return data
}

func u16(v uint16) *uint16 { return &v }
func u32(v uint32) *uint32 { return &v }

// setPayload replaces the payload of the n-th record (1-based).
func setField(n int, key string, value any) func(b *bundle) {
	return func(b *bundle) { b.records[n-1][key] = value }
}

// replaceLine renders the records and replaces line n (1-based) by an
// edit of its JSON text.
func editLine(t testing.TB, b *bundle, n int, edit func([]byte) []byte) {
	var lines [][]byte
	for _, r := range b.records {
		lines = append(lines, marshal(t, r))
	}
	lines[n-1] = edit(lines[n-1])
	b.lines = lines
}

func replaceIn(old, new string) func([]byte) []byte {
	return func(b []byte) []byte {
		if !bytes.Contains(b, []byte(old)) {
			panic("replaceIn: " + old + " not found in " + string(b))
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
}

// eventPayload replaces the payload of the tool_call_start event (record 8).
func eventPayload(p map[string]any) func(b *bundle) {
	return func(b *bundle) { b.records[7]["payload"] = p }
}

func baseEvent(typ string, data any) map[string]any {
	return event(typ, data, 9)
}

var artKey = sha(tArtifact)

// invalidCases has one row per message of REFERENCE §7.3 (in its order),
// the generic messages the reference reports for Python exceptions, and
// the inputs where hxd is stricter than the reference (DESIGN §8).
func invalidCases() []invalidCase {
	other := bytes.Repeat([]byte{0}, 256<<10)
	return []invalidCase{
		// 1. Size of the input.
		{name: "over byte limit (item 57)", limits: Limits{MaxBytes: 10}, want: "Incident exceeds byte limit"},
		// 2. Not a ZIP.
		{name: "not a zip", build: func(testing.TB, *bundle) []byte { return []byte("this is not a zip archive, just text") },
			want: "Invalid incident bundle (BadZipFile)"},
		{name: "empty input", build: func(testing.TB, *bundle) []byte { return nil }, want: "Invalid incident bundle (BadZipFile)"},
		{name: "truncated archive", patch: func(_ testing.TB, d []byte) []byte { return d[:len(d)-40] },
			want: "Invalid incident bundle (BadZipFile)"},
		{name: "central directory signature", patch: func(t testing.TB, d []byte) []byte {
			d[entry(t, d, memberRecords).central] = 'X'
			return d
		}, want: "Invalid incident bundle (BadZipFile)", why: "central directory"},
		{name: "entry name flagged UTF-8 is not", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, append(b.files(t), file{"artifacts/\xff", nil}), map[string]zipOpt{"artifacts/\xff": {flags: flagUTF8}})
		}, want: "Invalid incident bundle (UnicodeDecodeError)"},
		{name: "zip version above 6.3", patch: func(t testing.TB, d []byte) []byte {
			d[entry(t, d, memberRecords).central+6] = 64
			return d
		}, want: "Invalid incident bundle (NotImplementedError)"},
		// 3.–7. Container.
		{name: "too many members", limits: Limits{MaxMembers: 2}, want: "Too many bundle members"},
		{name: "duplicate member (item 48)", edit: func(b *bundle) { b.extra = []file{{memberRecords, []byte("x\n")}} },
			want: "Duplicate bundle member", member: memberRecords},
		{name: "expanded size over byte limit", build: func(t testing.TB, b *bundle) []byte {
			name := artifactPrefix + sha(other)
			b.extra = []file{{name, other}}
			return zipWith(t, b.files(t), map[string]zipOpt{name: {deflate: true}})
		}, limits: Limits{MaxBytes: 64 << 10}, want: "Expanded incident exceeds byte limit"},
		{name: "member over member limit", limits: Limits{MaxMemberBytes: 100}, want: "Bundle member exceeds byte limit", member: memberRecords},
		{name: "path escape (item 47)", edit: func(b *bundle) { b.extra = []file{{"../escape.py", []byte("import os\n")}} },
			want: "Unexpected bundle path", member: "../escape.py"},
		{name: "absolute path", edit: func(b *bundle) { b.extra = []file{{"/etc/passwd", []byte("x")}} }, want: "Unexpected bundle path"},
		{name: "directory entry", edit: func(b *bundle) { b.extra = []file{{"artifacts/", nil}} }, want: "Unexpected bundle path"},
		{name: "uppercase artifact key", edit: func(b *bundle) {
			b.extra = []file{{artifactPrefix + strings.ToUpper(sha([]byte("x"))), []byte("x")}}
		}, want: "Unexpected bundle path"},
		{name: "extra file", edit: func(b *bundle) { b.extra = []file{{"README.md", []byte("x")}} }, want: "Unexpected bundle path"},
		{name: "encrypted flag (item 48)", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, b.files(t), map[string]zipOpt{memberRecords: {flags: flagEncrypted}})
		}, want: "Encrypted members are not supported", member: memberRecords},
		{name: "symlink mode (item 48)", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, b.files(t), map[string]zipOpt{artifactPrefix + artKey: {extAttr: u32(0o120777 << 16)}})
		}, want: "Symlink members are not supported"},
		{name: "symlink mode from a DOS host", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, b.files(t), map[string]zipOpt{memberRecords: {extAttr: u32(0o120644<<16 | 0x20)}})
		}, want: "Symlink members are not supported"},
		{name: "bzip2 (item 48)", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, b.files(t), map[string]zipOpt{memberRecords: {method: u16(12)}})
		}, want: "Unsupported compression"},
		{name: "lzma (item 48)", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, b.files(t), map[string]zipOpt{memberManifest: {method: u16(14)}})
		}, want: "Unsupported compression"},
		{name: "records missing", edit: func(b *bundle) {
			b.editFiles = func(fs []file) []file { return fs[1:] }
		}, want: "Missing bundle manifest or records"},
		{name: "manifest missing", edit: func(b *bundle) {
			b.editFiles = func(fs []file) []file { return fs[:len(fs)-1] }
		}, want: "Missing bundle manifest or records"},
		// 8.–13. Manifest.
		{name: "manifest duplicate key (item 53)", edit: func(b *bundle) { b.editManifest = replaceIn(`{`, `{"format":"x",`) },
			want: "Duplicate JSON key", member: memberManifest},
		{name: "manifest nested duplicate key", edit: func(b *bundle) { b.editManifest = replaceIn(`"agent":{`, `"agent":{"name":"a",`) },
			want: "Duplicate JSON key"},
		{name: "manifest NaN (item 53)", edit: func(b *bundle) { b.editManifest = replaceIn(`"record_count":21`, `"record_count":NaN`) },
			want: "Non-finite JSON number"},
		{name: "manifest Infinity", edit: func(b *bundle) { b.editManifest = replaceIn(`"record_count":21`, `"record_count":Infinity`) },
			want: "Non-finite JSON number"},
		{name: "manifest -Infinity", edit: func(b *bundle) { b.editManifest = replaceIn(`"record_count":21`, `"record_count":-Infinity`) },
			want: "Non-finite JSON number"},
		{name: "manifest syntax", edit: func(b *bundle) { b.editManifest = func(m []byte) []byte { return m[:len(m)-1] } },
			want: "Invalid incident bundle (JSONDecodeError)", member: memberManifest},
		{name: "manifest not an object", edit: func(b *bundle) { b.editManifest = func([]byte) []byte { return []byte(`[]`) } },
			want: "Invalid manifest"},
		{name: "manifest version 2 (item 49)", edit: func(b *bundle) { b.manifest["version"] = 2 }, want: "Unsupported incident format/version"},
		{name: "manifest version 1.0 (item 49)", edit: func(b *bundle) { b.manifest["version"] = json.Number("1.0") },
			want: "Unsupported incident format/version"},
		{name: "manifest version true", edit: func(b *bundle) { b.manifest["version"] = true }, want: "Unsupported incident format/version"},
		{name: "manifest format (item 49)", edit: func(b *bundle) { b.manifest["format"] = "harnessx.incident" },
			want: "Unsupported incident format/version"},
		{name: "manifest empty run_id (item 49)", edit: func(b *bundle) { b.manifest["run_id"] = "" }, want: "Invalid manifest identity/state"},
		{name: "manifest phase missing", edit: func(b *bundle) { delete(b.manifest, "phase") }, want: "Invalid manifest identity/state"},
		{name: "manifest session_id number", edit: func(b *bundle) { b.manifest["session_id"] = 7 }, want: "Invalid manifest identity/state"},
		{name: "manifest status unknown (item 49)", edit: func(b *bundle) { b.manifest["status"] = "unknown" }, want: "Unknown run status"},
		{name: "members missing one", edit: func(b *bundle) {
			b.editMembers = func(m map[string]any) { delete(m, memberRecords) }
		}, want: "Manifest member set mismatch"},
		{name: "members list the manifest", edit: func(b *bundle) {
			b.editMembers = func(m map[string]any) { m[memberManifest] = map[string]any{"sha256": "x", "size": 1} }
		}, want: "Manifest member set mismatch"},
		{name: "members not an object", edit: func(b *bundle) { b.keepMembers = true; b.manifest["members"] = []any{} },
			want: "Manifest member set mismatch"},
		{name: "member descriptor not an object", edit: func(b *bundle) {
			b.editMembers = func(m map[string]any) { m[memberRecords] = "sha" }
		}, want: "Invalid member descriptor", member: memberRecords},
		{name: "wrong declared size (item 52)", edit: func(b *bundle) {
			b.editMembers = func(m map[string]any) {
				m[memberRecords].(map[string]any)["size"] = m[memberRecords].(map[string]any)["size"].(int) + 1
			}
		}, want: "Member size mismatch", member: memberRecords},
		{name: "declared size as float", edit: func(b *bundle) {
			b.editMembers = func(m map[string]any) {
				d := m[memberRecords].(map[string]any)
				d["size"] = json.Number(strings.TrimSpace(string(must(json.Marshal(d["size"])))) + ".0")
			}
		}, want: "Member size mismatch"},
		{name: "edited payload without rehash (item 52)", edit: func(b *bundle) {
			b.editFiles = func(fs []file) []file {
				return replaceFile(fs, memberRecords, bytes.ReplaceAll(fs[0].data, []byte("owes 1630.50"), []byte("owes 9630.50")))
			}
		}, want: "Member checksum mismatch", member: memberRecords},
		{name: "artifact checksum in members", edit: func(b *bundle) {
			b.editMembers = func(m map[string]any) { m[artifactPrefix+artKey].(map[string]any)["sha256"] = strings.ToUpper(artKey) }
		}, want: "Member checksum mismatch", member: artifactPrefix + artKey},
		// 15.–19. Records.
		{name: "too many records", limits: Limits{MaxRecords: 20}, want: "Too many incident records"},
		{name: "empty line", edit: func(b *bundle) {
			editLine(nil, b, 3, func(l []byte) []byte { return append(append([]byte{}, l...), '\n') })
		}, want: "Invalid incident bundle (JSONDecodeError)", seq: 4},
		{name: "record duplicate key (item 53)", edit: func(b *bundle) {
			editLine(nil, b, 5, replaceIn(`{"attempt_id":"1",`, `{"attempt_id":"1","attempt_id":"1",`))
		}, want: "Duplicate JSON key", seq: 5},
		{name: "record NaN (item 53)", edit: func(b *bundle) {
			editLine(nil, b, 5, replaceIn(`"input_tokens":120`, `"input_tokens":NaN`))
		}, want: "Non-finite JSON number", seq: 5},
		{name: "parse error wins over an earlier record error", edit: func(b *bundle) {
			b.records[1]["version"] = 2
			editLine(nil, b, 9, func(l []byte) []byte { return l[:len(l)-1] })
		}, want: "Invalid incident bundle (JSONDecodeError)", seq: 9},
		{name: "record_count off by one (item 54)", edit: func(b *bundle) { b.manifest["record_count"] = 22 }, want: "Record count mismatch"},
		{name: "record_count as float", edit: func(b *bundle) { b.manifest["record_count"] = json.Number("21.0") }, want: "Record count mismatch"},
		{name: "last_sequence off by one (item 54)", edit: func(b *bundle) { b.manifest["last_sequence"] = 20 }, want: "Last sequence mismatch"},
		{name: "record not an object", edit: func(b *bundle) { editLine(nil, b, 4, func([]byte) []byte { return []byte(`[]`) }) },
			want: "Invalid journal record", seq: 4},
		{name: "record version 2 (item 51)", edit: setField(3, "version", 2), want: "Unsupported journal version", seq: 3},
		{name: "record version true", edit: setField(3, "version", true), want: "Unsupported journal version"},
		{name: "two records with seq 1 (item 50)", edit: setField(2, "seq", 1), want: "Journal sequence gap or reordering", seq: 2},
		{name: "reordered records", edit: func(b *bundle) { b.records[3], b.records[4] = b.records[4], b.records[3] },
			want: "Journal sequence gap or reordering", seq: 4},
		{name: "seq as float", edit: setField(2, "seq", json.Number("2.0")), want: "Journal sequence gap or reordering"},
		{name: "duplicate record id (item 50)", edit: func(b *bundle) { b.records[5]["id"] = b.records[4]["id"] },
			want: "Missing or duplicate record identity", seq: 6},
		{name: "empty record id", edit: setField(5, "id", ""), want: "Missing or duplicate record identity"},
		{name: "mixed session_id (item 50)", edit: setField(6, "session_id", "someone-else"), want: "Mixed run/session identities", seq: 6},
		{name: "unknown kind (item 50)", edit: setField(7, "kind", "model.exploded"), want: "Unknown journal kind", seq: 7},
		{name: "unknown capture", edit: setField(7, "capture", "partial"), want: "Invalid capture status"},
		{name: "omitted with payload (item 51)", edit: setField(7, "capture", "omitted"), want: "Invalid omitted payload"},
		{name: "payload key missing", edit: func(b *bundle) { delete(b.records[6], "payload") }, want: "Invalid omitted payload"},
		{name: "present with string payload (item 51)", edit: setField(3, "payload", "text"), want: "Invalid journal payload"},
		{name: "step_id not a string", edit: setField(3, "step_id", 1), want: "Missing record metadata"},
		{name: "recorded_at missing", edit: func(b *bundle) { delete(b.records[2], "recorded_at") }, want: "Missing record metadata"},
		{name: "execution_key a number", edit: setField(3, "execution_key", 5), want: "Invalid execution key"},
		{name: "tool record without execution key (item 50)", edit: setField(9, "execution_key", nil),
			want: "Missing tool execution key", seq: 9},
		{name: "tool record with empty execution key", edit: setField(10, "execution_key", ""), want: "Missing tool execution key"},
		{name: "event of another run", edit: func(b *bundle) { b.records[7]["payload"].(map[string]any)["run_id"] = "other" },
			want: "Mixed event identity", seq: 8},
		{name: "event without run_id", edit: func(b *bundle) { delete(b.records[7]["payload"].(map[string]any), "run_id") },
			want: "Mixed event identity"},
		// Event decoding (RunEvent.from_dict): Python exception classes.
		{name: "event without type", edit: func(b *bundle) { delete(b.records[7]["payload"].(map[string]any), "type") },
			want: "Invalid incident bundle (KeyError)", seq: 8},
		{name: "event of unknown type", edit: eventPayload(baseEvent("telepathy", map[string]any{})),
			want: "Invalid incident bundle (ValueError)"},
		{name: "event with unknown field", edit: func(b *bundle) { b.records[7]["payload"].(map[string]any)["extra"] = 1 },
			want: "Invalid incident bundle (TypeError)"},
		{name: "text event with object data", edit: eventPayload(baseEvent("text_delta", map[string]any{})),
			want: "Invalid incident bundle (TypeError)"},
		{name: "tool call without input", edit: eventPayload(baseEvent("tool_call_start", map[string]any{"id": "c", "name": "n"})),
			want: "Invalid incident bundle (TypeError)"},
		{name: "tool result content not text", edit: eventPayload(baseEvent("tool_result", map[string]any{"tool_call_id": "c", "content": 5})),
			want: "Invalid incident bundle (TypeError)"},
		{name: "tool result conflicting ids", edit: eventPayload(baseEvent("tool_result", map[string]any{"tool_call_id": "a", "tool_use_id": "b"})),
			want: "Invalid incident bundle (ValueError)"},
		{name: "run result unknown status", edit: eventPayload(baseEvent("run_result", map[string]any{"session_id": "s", "run_id": "r", "status": "weird"})),
			want: "Invalid incident bundle (ValueError)"},
		{name: "run result error not an object", edit: eventPayload(baseEvent("run_result", map[string]any{
			"session_id": "s", "run_id": "r", "status": "failed", "error": "boom"})),
			want: "Invalid incident bundle (AttributeError)"},
		{name: "run result pending retry out of range", edit: eventPayload(baseEvent("run_result", map[string]any{
			"session_id": "s", "run_id": "r", "status": "awaiting_input",
			"pending": []any{map[string]any{"call": map[string]any{"id": "c", "name": "n"}, "execution_key": "k",
				"status": "approval", "retry": map[string]any{"attempts": 0}}}})),
			want: "Invalid incident bundle (ConfigurationError)"},
		{name: "approval event without execution key", edit: eventPayload(baseEvent("approval_required", map[string]any{"call": map[string]any{}})),
			want: "Invalid incident bundle (ValueError)"},
		{name: "attempt reset with float attempt", edit: eventPayload(baseEvent("attempt_reset", map[string]any{"attempt": json.Number("2.0")})),
			want: "Invalid incident bundle (ValueError)"},
		{name: "waiting on a human", edit: eventPayload(baseEvent("waiting", map[string]any{"on": "human", "seconds": 1})),
			want: "Invalid incident bundle (ValueError)"},
		// 20.–22. Artifacts.
		{name: "catalog missing a reference (item 55)", edit: func(b *bundle) {
			b.manifest["artifacts"] = map[string]any{}
			b.artifacts = nil
		}, want: "Artifact reference/catalog mismatch"},
		{name: "catalog missing one of two references (issue 18)", edit: addUncataloguedRef,
			want: "Artifact reference/catalog mismatch", member: memberManifest, why: "artifact://" + strings.Repeat("e", 64)},
		{name: "catalog of one key naming another reference", edit: func(b *bundle) {
			b.records[10]["payload"].(map[string]any)["content"] = "artifact://" + strings.Repeat("e", 64)
			b.records[11]["payload"].(map[string]any)["content"] = "artifact://" + strings.Repeat("e", 64)
			b.records[13]["payload"].(map[string]any)["data"].(map[string]any)["content"] = "artifact://" + strings.Repeat("e", 64)
		}, want: "Artifact reference/catalog mismatch", why: "catalog lists " + artKey},
		{name: "catalog listing a key while no record references any", edit: func(b *bundle) {
			b.metadataOnly()
			b.manifest["artifacts"] = map[string]any{artKey: map[string]any{"status": "omitted", "reason": "export_policy"}}
		}, want: "Artifact reference/catalog mismatch", why: "catalog lists " + artKey},
		{name: "catalog not an object", edit: func(b *bundle) { b.manifest["artifacts"] = []any{} }, want: "Artifact reference/catalog mismatch"},
		{name: "catalog with an unreferenced key", edit: func(b *bundle) {
			b.manifest["artifacts"].(map[string]any)[sha([]byte("x"))] = map[string]any{"status": "omitted"}
		}, want: "Artifact reference/catalog mismatch"},
		{name: "artifact descriptor not an object", edit: func(b *bundle) { b.manifest["artifacts"] = map[string]any{artKey: "included"} },
			want: "Invalid artifact descriptor", member: artifactPrefix + artKey},
		{name: "declared artifact missing", edit: func(b *bundle) { b.artifacts = nil }, want: "Missing declared artifact"},
		{name: "declared artifact with wrong path", edit: func(b *bundle) {
			b.manifest["artifacts"] = map[string]any{artKey: map[string]any{"status": "included", "path": "artifacts/x"}}
		}, want: "Missing declared artifact"},
		{name: "included artifact with wrong bytes (item 55)", edit: func(b *bundle) { b.artifacts[artKey] = []byte("tampered") },
			want: "Artifact checksum mismatch", member: artifactPrefix + artKey},
		{name: "unknown artifact status", edit: func(b *bundle) {
			b.manifest["artifacts"] = map[string]any{artKey: map[string]any{"status": "lost"}}
		}, want: "Unknown artifact status"},
		{name: "excluded artifact present (item 55)", edit: func(b *bundle) {
			b.manifest["artifacts"] = map[string]any{artKey: map[string]any{"status": "omitted", "reason": "export_policy"}}
		}, want: "Excluded artifact is present", member: artifactPrefix + artKey},
		{name: "unreferenced artifact member (item 55)", edit: func(b *bundle) { b.artifacts[sha([]byte("x"))] = []byte("x") },
			want: "Unreferenced bundle artifact", member: artifactPrefix + sha([]byte("x"))},
		// 23. Unresolved operations.
		{name: "unresolved operations not a list", edit: func(b *bundle) { b.manifest["unresolved_operations"] = map[string]any{} },
			want: "Invalid unresolved operations"},
		{name: "unresolved operations missing", edit: func(b *bundle) { delete(b.manifest, "unresolved_operations") },
			want: "Invalid unresolved operations"},
		{name: "unresolved operation with string attempt", edit: func(b *bundle) {
			b.manifest["unresolved_operations"] = []any{map[string]any{"execution_key": tToolKey, "status": "started", "attempt": "1"}}
		}, want: "Invalid unresolved operation"},
		{name: "unresolved operation with approval status", edit: func(b *bundle) {
			b.manifest["unresolved_operations"] = []any{map[string]any{"execution_key": tToolKey, "status": "approval", "attempt": 1}}
		}, want: "Invalid unresolved operation"},
		// 24. Checkpoint consistency ("Invalid checkpoint payload" is
		// unreachable from a bundle: see TestCheckpointPayloadNotObject).
		{name: "last checkpoint status differs (item 56)", edit: func(b *bundle) { b.manifest["status"] = "failed" },
			want: "Manifest/checkpoint state mismatch", seq: 21},
		{name: "last checkpoint phase differs", edit: func(b *bundle) { b.manifest["phase"] = "finish" },
			want: "Manifest/checkpoint state mismatch"},
		{name: "unresolved operations differ from checkpoint (item 56)", edit: func(b *bundle) {
			b.manifest["unresolved_operations"] = []any{map[string]any{"execution_key": tToolKey, "status": "started", "attempt": 1}}
		}, want: "Unresolved outcome metadata mismatch"},
		{name: "checkpoint tools entry without status", edit: func(b *bundle) {
			b.last("checkpoint")["payload"].(map[string]any)["tools"] = []any{map[string]any{"execution_key": "k"}}
		}, want: "Invalid incident bundle (KeyError)"},
		{name: "checkpoint tools null", edit: func(b *bundle) {
			b.last("checkpoint")["payload"].(map[string]any)["tools"] = nil
		}, want: "Invalid incident bundle (TypeError)"},
		// Other reference exceptions.
		{name: "record without execution_key field", edit: func(b *bundle) { delete(b.records[2], "execution_key") },
			want: "Invalid incident bundle (KeyError)", seq: 3},
		{name: "lone surrogate escape", edit: func(b *bundle) {
			editLine(nil, b, 1, replaceIn(`"Which invoices`, `"\ud800Which invoices`))
		}, want: "Invalid incident bundle (UnicodeEncodeError)", seq: 1},
		{name: "integer of 4301 digits", edit: func(b *bundle) {
			editLine(nil, b, 5, replaceIn(`"input_tokens":120`, `"input_tokens":1`+strings.Repeat("0", 4300)))
		}, want: "Invalid incident bundle (ValueError)"},
		{name: "nested too deeply", edit: func(b *bundle) {
			editLine(nil, b, 5, replaceIn(`"input_tokens":120`, `"input_tokens":`+strings.Repeat("[", 1001)+strings.Repeat("]", 1001)))
		}, want: "Invalid incident bundle (RecursionError)"},
		{name: "record not UTF-8", edit: func(b *bundle) {
			editLine(nil, b, 1, replaceIn(`Which invoices`, "Which\xffinvoices"))
		}, want: "Invalid incident bundle (UnicodeDecodeError)", seq: 1},
		{name: "invalid DEFLATE data", build: func(t testing.TB, b *bundle) []byte {
			fs := b.files(t)
			fs = replaceFile(fs, artifactPrefix+artKey, []byte{0xff, 0xff, 0xff, 0xff})
			return zipWith(t, fs, map[string]zipOpt{artifactPrefix + artKey: {method: u16(methodDeflated)}})
		}, want: "Invalid incident bundle (error)", member: artifactPrefix + artKey},
		{name: "CRC-32 mismatch", patch: func(t testing.TB, d []byte) []byte {
			e := entry(t, d, memberRecords)
			crc := binary.LittleEndian.Uint32(d[e.central+16:]) ^ 1
			put32(d, e.central+16, crc)
			put32(d, e.local+14, crc)
			return d
		}, want: "Invalid incident bundle (BadZipFile)", member: memberRecords, why: "CRC"},
		{name: "CRC-32 mismatch in the manifest", patch: func(t testing.TB, d []byte) []byte {
			e := entry(t, d, memberManifest)
			d[e.data+3] ^= 0x20
			return d
		}, want: "Invalid incident bundle (BadZipFile)", member: memberManifest, why: "CRC"},
		{name: "local and central names differ", patch: func(t testing.TB, d []byte) []byte {
			d[entry(t, d, memberRecords).local+sizeLocal] = 'R'
			return d
		}, want: "Invalid incident bundle (BadZipFile)", member: memberRecords, why: "name"},
		{name: "local header signature", patch: func(t testing.TB, d []byte) []byte {
			d[entry(t, d, memberRecords).local] = 'Q'
			return d
		}, want: "Invalid incident bundle (BadZipFile)"},
		// hxd is stricter (DESIGN §8).
		{name: "strict: manifest with BOM", edit: func(b *bundle) {
			b.editManifest = func(m []byte) []byte { return append([]byte("\ufeff"), m...) }
		}, want: "Invalid incident bundle (JSONDecodeError)", member: memberManifest},
		{name: "strict: records with BOM", edit: func(b *bundle) {
			editLine(nil, b, 1, func(l []byte) []byte { return append([]byte("\ufeff"), l...) })
		}, want: "Invalid incident bundle (JSONDecodeError)", seq: 1},
		{name: "strict: UTF-16 manifest", edit: func(b *bundle) { b.editManifest = utf16LE }, want: "Invalid incident bundle (JSONDecodeError)"},
		{name: "strict: 1e999 in the manifest", edit: func(b *bundle) {
			b.editManifest = replaceIn(`"created_at":"`+tTime+`"`, `"created_at":1e999`)
		}, want: "Non-finite JSON number", member: memberManifest, why: "overflows"},
		{name: "strict: NUL in an entry name", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, append(b.files(t), file{"records.jsonl\x00.py", []byte("x")}), nil)
		}, want: "Invalid incident bundle (BadZipFile)", why: "NUL"},
		{name: "strict: overlapping entries", patch: func(t testing.TB, d []byte) []byte {
			e := entry(t, d, memberRecords)
			for _, at := range []int{e.central + 20, e.central + 24, e.local + 18, e.local + 22} {
				put32(d, at, uint32(e.size+40))
			}
			return d
		}, want: "Invalid incident bundle (BadZipFile)", member: memberRecords, why: "overlaps"},
		{name: "strict: end record entry count", patch: func(_ testing.TB, d []byte) []byte {
			put16(d, len(d)-sizeEnd+10, binary.LittleEndian.Uint16(d[len(d)-sizeEnd+10:])+1)
			return d
		}, want: "Invalid incident bundle (BadZipFile)", why: "counts"},
		{name: "strict: bytes after the archive", patch: func(_ testing.TB, d []byte) []byte { return append(d, "\r\n"...) },
			want: msgTrailingData, why: "after the end record"},
		{name: "strict: local method differs", patch: func(t testing.TB, d []byte) []byte {
			put16(d, entry(t, d, memberRecords).local+8, methodDeflated)
			return d
		}, want: "Invalid incident bundle (BadZipFile)", why: "method"},
		{name: "strict: local sizes differ", patch: func(t testing.TB, d []byte) []byte {
			e := entry(t, d, memberRecords)
			put32(d, e.local+22, uint32(e.size-1))
			return d
		}, want: "Invalid incident bundle (BadZipFile)", why: "sizes"},
		{name: "strict: stored descriptor with wrong sizes", build: func(t testing.TB, b *bundle) []byte {
			return zipWith(t, b.files(t), map[string]zipOpt{memberRecords: {flags: flagDescriptor}})
		}, patch: func(t testing.TB, d []byte) []byte {
			e := entry(t, d, memberRecords)
			desc := e.data + e.size
			require.Equal(t, uint32(sigDescriptor), binary.LittleEndian.Uint32(d[desc:]))
			put32(d, desc+12, uint32(e.size+1))
			return d
		}, want: "Invalid incident bundle (BadZipFile)", why: "descriptor"},
		{name: "strict: stored sizes differ", patch: func(t testing.TB, d []byte) []byte {
			e := entry(t, d, memberRecords)
			put32(d, e.central+24, uint32(e.size-1))
			put32(d, e.local+22, uint32(e.size-1))
			return d
		}, want: "Invalid incident bundle (BadZipFile)"},
		{name: "strict: DEFLATE data longer than declared", build: func(t testing.TB, b *bundle) []byte {
			fs := b.files(t)
			var c bytes.Buffer
			w, _ := flate.NewWriter(&c, flate.BestSpeed)
			_, _ = w.Write(append(append([]byte{}, tArtifact...), "more"...))
			_ = w.Close()
			fs = replaceFile(fs, artifactPrefix+artKey, c.Bytes())
			data := zipWith(t, fs, map[string]zipOpt{artifactPrefix + artKey: {method: u16(methodDeflated)}})
			e := entry(t, data, artifactPrefix+artKey)
			put32(data, e.central+16, crc32.ChecksumIEEE(tArtifact))
			put32(data, e.local+14, crc32.ChecksumIEEE(tArtifact))
			put32(data, e.central+24, uint32(len(tArtifact)))
			put32(data, e.local+22, uint32(len(tArtifact)))
			return data
		}, want: "Invalid incident bundle (BadZipFile)", why: "longer"},
	}
}

// addUncataloguedRef is the repro of issue 18: a valid bundle with one
// catalogued artifact whose first record also mentions
// artifact://eee…e, which the catalog does not list; the members are
// re-sealed.
func addUncataloguedRef(b *bundle) {
	p := b.records[0]["payload"].(map[string]any)
	p["message"] = p["message"].(string) + " See artifact://" + strings.Repeat("e", 64) + "."
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func utf16LE(b []byte) []byte {
	out := []byte{0xff, 0xfe}
	for _, u := range utf16.Encode([]rune(string(b))) {
		out = binary.LittleEndian.AppendUint16(out, u)
	}
	return out
}

// strictJSONCases set the strict loader's rejections against the
// reference's (issue 18): where the reference rejects the bundle too, its
// message, with hxd's reason in the detail; hxd's own message only where
// the reference accepts the bundle (DESIGN §8), and only once every check
// of the reference has passed.
func strictJSONCases() []invalidCase {
	const (
		valueErr  = "Invalid incident bundle (ValueError)"
		encodeErr = "Invalid incident bundle (UnicodeEncodeError)"
		decodeErr = "Invalid incident bundle (UnicodeDecodeError)"
		syntaxErr = "Invalid incident bundle (JSONDecodeError)"
		nonFinite = "Non-finite JSON number"
	)
	overflow := func(n int, old, lit string) func(b *bundle) {
		return func(b *bundle) { editLine(nil, b, n, replaceIn(old, lit)) }
	}
	both := func(edits ...func(b *bundle)) func(b *bundle) {
		return func(b *bundle) {
			for _, e := range edits {
				e(b)
			}
		}
	}
	timeout := overflow(1, `"timeout":300.0`, `"timeout":1e999`)
	createdAt := func(v string) func(b *bundle) {
		return func(b *bundle) { b.editManifest = replaceIn(`"created_at":"`+tTime+`"`, `"created_at":`+v) }
	}
	// utf16Line re-encodes record n as UTF-16-LE without a BOM (its line
	// break stays one byte: json.loads reads the line).
	utf16Line := func(n int) func(b *bundle) {
		return func(b *bundle) {
			if b.lines == nil {
				editLine(nil, b, n, func(l []byte) []byte { return l })
			}
			b.lines[n-1] = utf16LE(b.lines[n-1])[2:]
		}
	}
	return []invalidCase{
		// A float literal that overflows: Python reads an infinity, which
		// json.dumps refuses when the reference collects artifact
		// references (item 20).
		{name: "record holding 1e999", edit: timeout, want: valueErr, member: memberRecords, seq: 1, why: nonFinite},
		{name: "record holding -1e999", edit: overflow(5, `"input_tokens":120`, `"input_tokens":-1e999`), want: valueErr, seq: 5},
		{name: "record holding 1.5e308 nested", edit: overflow(13, `"attempt":1`, `"attempt":[{"x":1.8e308}]`), want: valueErr, seq: 13},
		{name: "overflow in a later record than a lone surrogate", edit: both(
			func(b *bundle) { editLine(nil, b, 1, replaceIn(`"Which invoices`, `"\ud800Which invoices`)) },
			overflow(5, `"input_tokens":120`, `"input_tokens":1e999`)), want: valueErr, seq: 5},
		{name: "overflow in an event the RunEvent checks accept", edit: eventPayload(baseEvent("waiting",
			map[string]any{"on": "model", "seconds": json.Number("1e999")})), want: valueErr, seq: 8},
		// ... where an earlier check of the reference fails, its message.
		{name: "1e999 then a later record's version", edit: both(setField(3, "version", 2), timeout),
			want: "Unsupported journal version", seq: 3},
		{name: "1e999 and a wrong record_count", edit: both(timeout, func(b *bundle) { b.manifest["record_count"] = 22 }),
			want: "Record count mismatch"},
		{name: "1e999 as seq", edit: overflow(2, `"seq":2`, `"seq":2e999`), want: "Journal sequence gap or reordering", seq: 2},
		{name: "1e999 as version", edit: overflow(2, `"version":1`, `"version":1e999`), want: "Unsupported journal version", seq: 2},
		{name: "1e999 as execution_key", edit: overflow(3, `"execution_key":null`, `"execution_key":1e999`), want: "Invalid execution key"},
		{name: "1e999 and a later syntax error", edit: both(timeout, func(b *bundle) {
			editLine(nil, b, 9, func(l []byte) []byte { return l[:len(l)-1] })
		}), want: syntaxErr, seq: 9},
		{name: "1e999 and a catalog that is not an object", edit: both(timeout, func(b *bundle) { b.manifest["artifacts"] = []any{} }),
			want: "Artifact reference/catalog mismatch"},
		{name: "1e999 as an event's attempt", edit: eventPayload(baseEvent("attempt_reset", map[string]any{"attempt": json.Number("1e999")})),
			want: valueErr, seq: 8, why: "RunEvent"},
		{name: "1e999 as a pending tool's attempt: int(inf)", edit: eventPayload(baseEvent("run_result", map[string]any{
			"session_id": "s", "run_id": "r", "status": "awaiting_input",
			"pending": []any{map[string]any{"call": map[string]any{"id": "c", "name": "n"}, "execution_key": "k",
				"status": "approval", "attempt": json.Number("1e999")}}})),
			want: "Invalid incident bundle (OverflowError)", seq: 8},
		{name: "1e999 as a retry backoff: not finite", edit: eventPayload(baseEvent("run_result", map[string]any{
			"session_id": "s", "run_id": "r", "status": "awaiting_input",
			"pending": []any{map[string]any{"call": map[string]any{"id": "c", "name": "n"}, "execution_key": "k",
				"status": "approval", "retry": map[string]any{"backoff_seconds": json.Number("1e999")}}}})),
			want: "Invalid incident bundle (ConfigurationError)", seq: 8},
		// A UTF-8-encoded surrogate: Python decodes it ("surrogatepass"),
		// then cannot encode the records as UTF-8 (item 20).
		{name: "record holding a UTF-8-encoded surrogate", edit: func(b *bundle) {
			editLine(nil, b, 4, replaceIn(`"stop_reason":"tool_use"`, "\"stop_reason\":\"tool\xed\xb0\x80use\""))
		}, want: encodeErr, seq: 4, why: "UTF-8-encoded surrogate"},
		{name: "encoded surrogate and a later record's kind", edit: func(b *bundle) {
			editLine(nil, b, 4, replaceIn(`"stop_reason":"tool_use"`, "\"stop_reason\":\"\xed\xa0\x80\""))
			b.lines[6] = bytes.Replace(b.lines[6], []byte(`"kind":"checkpoint"`), []byte(`"kind":"checkpoint.x"`), 1)
		}, want: "Unknown journal kind", seq: 7},
		{name: "invalid UTF-8 is still a decode error", edit: func(b *bundle) {
			editLine(nil, b, 4, replaceIn(`"stop_reason":"tool_use"`, "\"stop_reason\":\"\xed\xa0\""))
		}, want: decodeErr, seq: 4},
		// Non-finite literals and duplicate keys: the reference's own
		// messages, in the records and in the manifest.
		{name: "record Infinity", edit: overflow(5, `"input_tokens":120`, `"input_tokens":Infinity`), want: nonFinite, seq: 5},
		{name: "record -Infinity after a 1e999", edit: both(timeout, overflow(5, `"input_tokens":120`, `"input_tokens":-Infinity`)),
			want: nonFinite, seq: 5},
		{name: "manifest NaN after a 1e999", edit: createdAt(`[1e999,NaN]`), want: nonFinite, member: memberManifest},
		{name: "manifest duplicate key after a 1e999", edit: createdAt(`{"a":1e999,"a":1}`), want: "Duplicate JSON key"},
		// A BOM, UTF-16: json.loads decodes them. hxd refuses them once
		// the reference's checks have passed; the reference's message
		// where one fails, or where loading the decoded text fails.
		{name: "record in UTF-16", edit: utf16Line(3), want: syntaxErr, seq: 3, why: "utf-16-le text"},
		{name: "record in UTF-16 with NaN", edit: both(overflow(5, `"input_tokens":120`, `"input_tokens":NaN`), utf16Line(5)),
			want: nonFinite, seq: 5},
		{name: "record in UTF-16 with a duplicate key", edit: both(
			overflow(5, `{"attempt_id":"1",`, `{"attempt_id":"1","attempt_id":"1",`), utf16Line(5)), want: "Duplicate JSON key", seq: 5},
		{name: "record in UTF-16 of version 2", edit: both(setField(5, "version", 2), utf16Line(5)),
			want: "Unsupported journal version", seq: 5},
		{name: "record in UTF-16 holding 1e999", edit: both(overflow(5, `"input_tokens":120`, `"input_tokens":1e999`), utf16Line(5)),
			want: valueErr, seq: 5},
		{name: "record in UTF-16 and a wrong catalog", edit: both(utf16Line(2), func(b *bundle) {
			b.manifest["artifacts"].(map[string]any)[sha([]byte("x"))] = map[string]any{"status": "omitted"}
		}), want: "Artifact reference/catalog mismatch"},
		{name: "record with BOM then an unresolved mismatch", edit: both(
			func(b *bundle) { editLine(nil, b, 2, func(l []byte) []byte { return append([]byte("\ufeff"), l...) }) },
			func(b *bundle) { b.manifest["phase"] = "finish" }),
			want: "Manifest/checkpoint state mismatch"},
		{name: "record with two BOMs", edit: func(b *bundle) {
			editLine(nil, b, 2, func(l []byte) []byte { return append([]byte("\ufeff\ufeff"), l...) })
		}, want: syntaxErr, seq: 2},
		{name: "manifest with BOM and a broken member digest", edit: func(b *bundle) {
			b.editManifest = func(m []byte) []byte { return append([]byte("\ufeff"), m...) }
			b.editMembers = func(m map[string]any) { m[memberRecords].(map[string]any)["sha256"] = sha(nil) }
		}, want: "Member checksum mismatch", member: memberRecords},
		{name: "manifest in UTF-16 with an unknown status", edit: func(b *bundle) {
			b.manifest["status"] = "exploded"
			b.editManifest = utf16LE
		}, want: "Unknown run status"},
		{name: "manifest in UTF-16 with a lone surrogate", edit: func(b *bundle) {
			b.manifest["created_at"] = "\ufffd"
			b.editManifest = func(m []byte) []byte {
				m = utf16LE(m)
				k := bytes.Index(m, utf16LE([]byte("\ufffd"))[2:])
				m[k], m[k+1] = 0x00, 0xd8 // a lone high surrogate in place of U+FFFD
				return m
			}
		}, want: syntaxErr, member: memberManifest, why: "utf-16 text"},
		// Only hxd refuses: an overflow or an encoded surrogate in the
		// manifest where the reference never looks.
		{name: "manifest holding 1e999 in created_at", edit: createdAt(`1e999`), want: nonFinite, member: memberManifest, why: "overflows"},
		{name: "manifest holding 1e999, bundle incomplete", edit: both(createdAt(`-1e999`), func(b *bundle) { b.manifest["status"] = "running" },
			func(b *bundle) { b.last("checkpoint")["payload"].(map[string]any)["status"] = "running" }), want: nonFinite},
		{name: "manifest holding an encoded surrogate", edit: createdAt("\"\xed\xa0\x80\""), want: decodeErr, member: memberManifest,
			why: "surrogate"},
		{name: "1e999 as record_count", edit: func(b *bundle) { b.editManifest = replaceIn(`"record_count":21`, `"record_count":1e999`) },
			want: "Record count mismatch"},
		{name: "1e999 as a member size", edit: func(b *bundle) {
			b.editMembers = func(m map[string]any) { m[memberRecords].(map[string]any)["size"] = json.Number("1e999") }
		}, want: "Member size mismatch", member: memberRecords},
		{name: "1e999 in the manifest and a later record's version", edit: both(createdAt(`1e999`), setField(4, "version", 2)),
			want: "Unsupported journal version", seq: 4},
		{name: "encoded surrogate as the manifest's status", edit: func(b *bundle) {
			b.editManifest = replaceIn(`"status":"completed"`, "\"status\":\"completed\xed\xa0\x80\"")
		}, want: "Unknown run status"},
		{name: "manifest encoded surrogate and a record's encoded surrogate", edit: both(createdAt("\"\xed\xa0\x80\""), func(b *bundle) {
			editLine(nil, b, 4, replaceIn(`"stop_reason":"tool_use"`, "\"stop_reason\":\"\xed\xa0\x80\""))
		}), want: encodeErr, seq: 4},
	}
}

func TestVerifyInvalid(t *testing.T) {
	t.Parallel()
	runInvalidCases(t, invalidCases())
}

func TestVerifyStrictJSON(t *testing.T) {
	t.Parallel()
	runInvalidCases(t, strictJSONCases())
}

func runInvalidCases(t *testing.T, cases []invalidCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			data := c.archive(t)
			r := verifyBytes(data, c.limits)
			require.False(t, r.Valid, "%+v", r)
			require.False(t, r.Complete)
			require.Zero(t, r.RecordCount)
			require.Equal(t, []string{c.want}, r.Issues, "details: %+v", r.Details)
			require.Len(t, r.Details, 1)
			d := r.Details[0]
			require.Equal(t, c.want, d.Issue)
			if c.member != "" {
				require.Equal(t, c.member, d.Member, "%+v", d)
			}
			if c.seq != 0 {
				require.Equal(t, c.seq, d.Seq, "%+v", d)
			}
			if c.why != "" {
				require.Contains(t, d.Message, c.why, "%+v", d)
			}
			// Playback reports the same failure.
			_, err := Playback(bytes.NewReader(data), int64(len(data)), c.limits)
			require.ErrorIs(t, err, ErrInvalidBundle)
			var ie *InvalidError
			require.True(t, errors.As(err, &ie))
			require.Equal(t, c.want, ie.Message)
			require.Equal(t, d, ie.Detail)
		})
	}
}

// TestVerifyEveryMessage checks that the table covers every message of
// REFERENCE §7.3.
func TestVerifyEveryMessage(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{msgCheckpointPayload: true} // see TestCheckpointPayloadNotObject
	for _, c := range invalidCases() {
		covered[c.want] = true
	}
	for _, msg := range []string{
		msgByteLimit, msgTooManyMembers, msgDuplicateMember, msgExpandedLimit, msgMemberLimit, msgUnexpectedPath,
		msgEncrypted, msgSymlink, msgCompression, msgMissingMembers, msgDuplicateKey, msgNonFinite, msgInvalidManifest,
		msgFormatVersion, msgManifestIdentity, msgUnknownStatus, msgMemberSet, msgMemberDescriptor, msgMemberSize,
		msgMemberChecksum, msgTooManyRecords, msgRecordCount, msgLastSequence, msgInvalidRecord, msgJournalVersion,
		msgSequence, msgRecordIdentity, msgMixedIdentity, msgUnknownKind, msgCapture, msgOmittedPayload, msgPayload,
		msgMetadata, msgExecutionKey, msgToolKey, msgEventIdentity, msgCatalog, msgArtifactDescriptor,
		msgMissingArtifact, msgArtifactChecksum, msgArtifactStatus, msgExcludedPresent, msgUnreferenced,
		msgUnresolvedOps, msgUnresolvedOp, msgCheckpointPayload, msgCheckpointState, msgUnresolvedMismatch,
		generic(pyBadZipFile), generic(pyJSONDecodeError),
	} {
		require.True(t, covered[msg], "no case for %q", msg)
	}
}

// TestCheckpointPayloadNotObject: "Invalid checkpoint payload" cannot be
// reached from a bundle (a present payload must already be an object,
// item 19), so the check is exercised directly.
func TestCheckpointPayloadNotObject(t *testing.T) {
	t.Parallel()
	var doc jsonDoc
	require.Nil(t, doc.parse([]byte(`{"artifacts":{},"unresolved_operations":[]}`)))
	m := manifestView{status: "completed", phase: "result", artifacts: doc.root().get("artifacts"), unresolved: doc.root().get("unresolved_operations")}
	for _, payload := range []string{`[]`, `"x"`, `null`, `1`} {
		f := checkpointConsistency([]byte(payload), 7, m)
		require.NotNil(t, f)
		require.Equal(t, msgCheckpointPayload, f.msg)
		require.Equal(t, 7, f.detail.Seq)
	}
	require.Nil(t, checkpointConsistency([]byte(`{"status":"completed","phase":"result","tools":[]}`), 7, m))
}
