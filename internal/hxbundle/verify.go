package hxbundle

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
)

// Verification reproduces `_read_bundle` of harnessx/recorder.py
// (REFERENCE §7.3) check by check, in the same order and with the same
// messages. A failure the reference reports through its generic handler
// reads "Invalid incident bundle (<Python exception class>)"; the classes
// hxd reports, and the Go conditions they stand for:
//
//	BadZipFile          not a ZIP, damaged central directory, bad local
//	                    header, CRC-32 mismatch, and every structural
//	                    check hxd adds (reader.go)
//	error               invalid DEFLATE data (zlib.error)
//	NotImplementedError ZIP version needed above 6.3, flag bit 5 or 6
//	UnicodeDecodeError  an entry name flagged UTF-8 that is not; JSON text
//	                    that is not valid UTF-8 (or UTF-16/32 that
//	                    Python's codec would not decode)
//	JSONDecodeError     JSON syntax error, empty record line; hxd also
//	                    for a BOM and for UTF-16/32 text (jsonvalue.go)
//	ValueError          integer literal over 4300 digits; RunEvent
//	                    validation (runevent.go); a record holding a
//	                    float literal that overflows, such as 1e999: the
//	                    reference reads an infinity, which json.dumps
//	                    refuses when it collects artifact references
//	RecursionError      JSON nested deeper than maxJSONDepth
//	TypeError, KeyError, AttributeError, ConfigurationError, OverflowError
//	                    RunEvent decoding (runevent.go); the checkpoint
//	                    tools list of item 24; KeyError also for a record
//	                    without an execution_key field (the reference's
//	                    completeness pass subscripts it)
//	UnicodeEncodeError  a record holding a lone surrogate, escaped or
//	                    UTF-8-encoded (Python decodes with
//	                    "surrogatepass"): the reference cannot encode it as
//	                    UTF-8 when it collects artifact references
//	OSError             an I/O error from the io.ReaderAt; a negative local
//	                    header offset
//
// hxd is stricter than the reference only on input a conforming writer
// never produces (DESIGN §8); see reader.go, canonical.go and
// jsonvalue.go. The canonical-archive checks (canonical.go: bytes that
// belong to no member the central directory names) are the only ones
// with messages of their own, since the reference has none for them:
// "Data before the first bundle member", "Bundle entry missing from the
// central directory", "Overlapping bundle members", "Gap between bundle
// members", "Misplaced ZIP64 end record", "Data after the end of the
// archive"; they are made once every check of the reference has passed. A JSON
// text the reference reads but hxd refuses (a BOM, UTF-16/32, an
// overflowing float literal or a UTF-8-encoded surrogate in the
// manifest) is refused only once every check of the reference has
// passed, so that whatever the reference rejects gets its message:
// "Non-finite JSON number" for an overflowing float literal in the
// manifest, (JSONDecodeError) for the encodings, (UnicodeDecodeError)
// for an encoded surrogate, with hxd's reason in the detail.

// Names inside a bundle.
const (
	memberManifest = "manifest.json"
	memberRecords  = "records.jsonl"
	artifactPrefix = "artifacts/"
	formatID       = "harness-x.incident"
	capturePresent = "present"
)

// The reference's rejection messages (REFERENCE §7.3).
const (
	msgByteLimit          = "Incident exceeds byte limit"
	msgTooManyMembers     = "Too many bundle members"
	msgDuplicateMember    = "Duplicate bundle member"
	msgExpandedLimit      = "Expanded incident exceeds byte limit"
	msgMemberLimit        = "Bundle member exceeds byte limit"
	msgUnexpectedPath     = "Unexpected bundle path"
	msgEncrypted          = "Encrypted members are not supported"
	msgSymlink            = "Symlink members are not supported"
	msgCompression        = "Unsupported compression"
	msgMissingMembers     = "Missing bundle manifest or records"
	msgInvalidManifest    = "Invalid manifest"
	msgFormatVersion      = "Unsupported incident format/version"
	msgManifestIdentity   = "Invalid manifest identity/state"
	msgUnknownStatus      = "Unknown run status"
	msgMemberSet          = "Manifest member set mismatch"
	msgMemberDescriptor   = "Invalid member descriptor"
	msgMemberSize         = "Member size mismatch"
	msgMemberChecksum     = "Member checksum mismatch"
	msgTooManyRecords     = "Too many incident records"
	msgRecordCount        = "Record count mismatch"
	msgLastSequence       = "Last sequence mismatch"
	msgInvalidRecord      = "Invalid journal record"
	msgJournalVersion     = "Unsupported journal version"
	msgSequence           = "Journal sequence gap or reordering"
	msgRecordIdentity     = "Missing or duplicate record identity"
	msgMixedIdentity      = "Mixed run/session identities"
	msgUnknownKind        = "Unknown journal kind"
	msgCapture            = "Invalid capture status"
	msgOmittedPayload     = "Invalid omitted payload"
	msgPayload            = "Invalid journal payload"
	msgMetadata           = "Missing record metadata"
	msgExecutionKey       = "Invalid execution key"
	msgToolKey            = "Missing tool execution key"
	msgEventIdentity      = "Mixed event identity"
	msgCatalog            = "Artifact reference/catalog mismatch"
	msgArtifactDescriptor = "Invalid artifact descriptor"
	msgMissingArtifact    = "Missing declared artifact"
	msgArtifactChecksum   = "Artifact checksum mismatch"
	msgArtifactStatus     = "Unknown artifact status"
	msgExcludedPresent    = "Excluded artifact is present"
	msgUnreferenced       = "Unreferenced bundle artifact"
	msgUnresolvedOps      = "Invalid unresolved operations"
	msgUnresolvedOp       = "Invalid unresolved operation"
	msgCheckpointPayload  = "Invalid checkpoint payload"
	msgCheckpointState    = "Manifest/checkpoint state mismatch"
	msgUnresolvedMismatch = "Unresolved outcome metadata mismatch"
)

// Python exception classes named in generic messages.
const (
	pyBadZipFile          = "BadZipFile"
	pyZlibError           = "error"
	pyNotImplementedError = "NotImplementedError"
	pyUnicodeDecodeError  = "UnicodeDecodeError"
	pyUnicodeEncodeError  = "UnicodeEncodeError"
	pyJSONDecodeError     = "JSONDecodeError"
	pyRecursionError      = "RecursionError"
	pyValueError          = "ValueError"
	pyTypeError           = "TypeError"
	pyKeyError            = "KeyError"
	pyAttributeError      = "AttributeError"
	pyConfigurationError  = "ConfigurationError"
	pyOverflowError       = "OverflowError"
	pyOSError             = "OSError"
)

// generic is the reference's message for an exception it catches.
func generic(class string) string { return "Invalid incident bundle (" + class + ")" }

// failure is a rejection: the message and where it was found.
type failure struct {
	msg    string
	detail Detail
}

func (f *failure) report() Report {
	d := f.detail
	d.Issue = f.msg
	return Report{Valid: false, Complete: false, RecordCount: 0, Issues: []string{f.msg}, Details: []Detail{d}}
}

// Verify checks the bundle of the given size read from r (REFERENCE §7):
// every validity check of §7.3 in order, then the completeness pass of
// §7.4. It never fails: a malformed, oversized or unreadable input yields
// Report{Valid: false, Issues: [message]} with the reference's message.
// Limits fields that are not positive take their DefaultLimits value;
// the byte limit applies to size. Verify streams each member through
// SHA-256 and CRC-32 in chunks, reading members (and parsing records) on
// up to GOMAXPROCS goroutines with parallel ReadAt calls, as io.ReaderAt
// permits; it keeps neither records nor artifacts in memory. It may be
// called concurrently.
func Verify(r io.ReaderAt, size int64, limits Limits) Report {
	return verify(r, size, limits, false).report
}

// result is the outcome of one verification.
type result struct {
	report    Report
	fail      *failure
	manifest  []byte
	records   [][]byte
	artifacts map[string][]byte
}

func verify(r io.ReaderAt, size int64, limits Limits, keep bool) *result {
	v := &verifier{r: r, size: size, lim: limits.orDefault(), keep: keep}
	if f := v.run(); f != nil {
		return &result{report: f.report(), fail: f}
	}
	return &result{report: v.report, manifest: v.manifestRaw, records: v.recs.raw, artifacts: v.artifacts}
}

// orDefault replaces limits that are not positive by the defaults.
func (l Limits) orDefault() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxMemberBytes <= 0 {
		l.MaxMemberBytes = DefaultLimits.MaxMemberBytes
	}
	if l.MaxRecords <= 0 {
		l.MaxRecords = DefaultLimits.MaxRecords
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultLimits.MaxMembers
	}
	return l
}

// verifier holds the state of one verification.
type verifier struct {
	r    io.ReaderAt
	size int64
	lim  Limits
	keep bool // playback: keep manifest, records and artifacts

	z      *zipArchive
	byName map[string]*zipEntry

	manifest    jsonDoc
	manifestRaw []byte
	// manifestStrict is hxd's own rejection of the manifest's text (a
	// BOM, UTF-16/32, an overflowing float literal, a UTF-8-encoded
	// surrogate), reported once every check of the reference passed.
	manifestStrict *failure
	m              jv
	runID          string
	sessionID      string
	status         string
	phase          string

	digests   map[string]string // member name → SHA-256 hex
	recs      *recordStream
	artifacts map[string][]byte
	report    Report
}

func (v *verifier) run() *failure {
	// 1. The input size (the reference's on-disk size check).
	if v.size > v.lim.MaxBytes {
		return &failure{msg: msgByteLimit, detail: Detail{
			Message: fmt.Sprintf("archive is %d bytes, the limit is %d", v.size, v.lim.MaxBytes)}}
	}
	if v.size < 0 {
		return badZip("negative archive size")
	}
	// 2. Open the archive.
	z, f := openZip(v.r, v.size, min(v.lim.MaxMembers, math.MaxInt-1)+1)
	if f != nil {
		return f
	}
	v.z = z
	// 3.–7. Container checks.
	if z.count > v.lim.MaxMembers {
		return &failure{msg: msgTooManyMembers, detail: Detail{
			Message: fmt.Sprintf("%d entries, the limit is %d", z.count, v.lim.MaxMembers)}}
	}
	v.byName = make(map[string]*zipEntry, len(z.entries))
	for i := range z.entries {
		e := &z.entries[i]
		if _, dup := v.byName[e.name]; dup {
			return &failure{msg: msgDuplicateMember, detail: Detail{Member: printableName(e.name)}}
		}
		v.byName[e.name] = e
	}
	var total uint64
	for i := range z.entries {
		total += z.entries[i].usize
		if total < z.entries[i].usize || total > uint64(v.lim.MaxBytes) {
			return &failure{msg: msgExpandedLimit, detail: Detail{
				Message: fmt.Sprintf("declared member sizes exceed %d bytes", v.lim.MaxBytes)}}
		}
	}
	for i := range z.entries {
		if f := v.checkEntry(&z.entries[i]); f != nil {
			return f
		}
	}
	if v.byName[memberManifest] == nil || v.byName[memberRecords] == nil {
		return &failure{msg: msgMissingMembers}
	}
	if f := v.checkManifest(); f != nil {
		return f
	}
	if f := v.checkMembers(); f != nil {
		return f
	}
	if f := v.checkRecords(); f != nil {
		return f
	}
	if f := v.checkArtifacts(); f != nil {
		return f
	}
	if f := v.checkUnresolved(); f != nil {
		return f
	}
	issues, details, f := v.recs.comp.finish(manifestView{
		status: v.status, phase: v.phase,
		artifacts: v.m.get("artifacts"), unresolved: v.m.get("unresolved_operations"),
	})
	if f != nil {
		return f
	}
	// The reference accepts the bundle: hxd's own rejections (DESIGN §8).
	if f := v.z.checkCanonical(); f != nil {
		return f
	}
	if v.manifestStrict != nil {
		return v.manifestStrict
	}
	if v.recs.strict != nil {
		return v.recs.strict
	}
	if issues == nil {
		issues = []string{}
	}
	if details == nil {
		details = []Detail{}
	}
	v.report = Report{Valid: true, Complete: len(issues) == 0, RecordCount: v.recs.lines, Issues: issues, Details: details}
	return nil
}

// checkEntry is item 6 for one entry.
func (v *verifier) checkEntry(e *zipEntry) *failure {
	at := Detail{Member: printableName(e.name)}
	fail := func(msg string) *failure { return &failure{msg: msg, detail: at} }
	if e.usize > uint64(v.lim.MaxMemberBytes) {
		at.Message = fmt.Sprintf("declared size %d, the limit is %d", e.usize, v.lim.MaxMemberBytes)
		return fail(msgMemberLimit)
	}
	if !validMemberName(e.name) {
		return fail(msgUnexpectedPath)
	}
	if e.flags&flagEncrypted != 0 {
		return fail(msgEncrypted)
	}
	if (e.extAttr>>16)&0o170000 == 0o120000 {
		return fail(msgSymlink)
	}
	if e.method != methodStored && e.method != methodDeflated {
		at.Message = fmt.Sprintf("compression method %d", e.method)
		return fail(msgCompression)
	}
	return nil
}

// validMemberName: manifest.json, records.jsonl or artifacts/<64 hex>.
func validMemberName(name string) bool {
	if name == memberManifest || name == memberRecords {
		return true
	}
	key, ok := strings.CutPrefix(name, artifactPrefix)
	return ok && isArtifactKey(key)
}

func isLowerHex(c byte) bool { return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') }

func isArtifactKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// checkManifest is items 8–13.
func (v *verifier) checkManifest() *failure {
	e := v.byName[memberManifest]
	var raw bytes.Buffer
	raw.Grow(int(min(e.usize, uint64(v.lim.MaxMemberBytes)))) // its declared size: one allocation
	if _, _, f := v.z.readMember(e, func(b []byte) { raw.Write(b) }); f != nil {
		return f
	}
	v.manifestRaw = raw.Bytes()
	at := Detail{Member: memberManifest}
	fail := func(msg string) *failure { return &failure{msg: msg, detail: at} }
	if e := v.manifest.parse(v.manifestRaw); e != nil {
		at.Message = fmt.Sprintf("byte %d: %s", e.off, e.why)
		return fail(e.msg)
	}
	if e := v.manifest.strictOnly(); e != nil {
		v.manifestStrict = &failure{msg: e.msg, detail: Detail{Member: memberManifest, Message: fmt.Sprintf("byte %d: %s", e.off, e.why)}}
	}
	m := v.manifest.root()
	v.m = m
	if !m.isObject() {
		return fail(msgInvalidManifest)
	}
	if !m.get("format").isStr(formatID) || !m.get("version").intEquals(1) {
		return fail(msgFormatVersion)
	}
	for _, key := range []string{"run_id", "session_id", "status", "phase"} {
		if s, ok := m.get(key).str(); !ok || s == "" {
			at.Message = key + " is not a non-empty string"
			return fail(msgManifestIdentity)
		}
	}
	v.runID, _ = m.get("run_id").str()
	v.sessionID, _ = m.get("session_id").str()
	v.status, _ = m.get("status").str()
	v.phase, _ = m.get("phase").str()
	if !m.get("status").strIn(runStatuses...) {
		return fail(msgUnknownStatus)
	}
	index := m.get("members")
	if !index.isObject() || index.length() != len(v.byName)-1 {
		return fail(msgMemberSet)
	}
	ok := true
	index.members(func(key, _ jv) bool {
		name, _ := key.str()
		ok = name != memberManifest && v.byName[name] != nil
		if !ok {
			at.Message = "manifest lists " + printableName(name) + " which is not in the archive"
		}
		return ok
	})
	if !ok {
		return fail(msgMemberSet)
	}
	return nil
}

// checkRecords is items 15–19, from what the record stream collected.
func (v *verifier) checkRecords() *failure {
	rs := v.recs
	at := Detail{Member: memberRecords}
	if rs.tooMany {
		at.Message = fmt.Sprintf("%d lines, the limit is %d", rs.lines, v.lim.MaxRecords)
		return &failure{msg: msgTooManyRecords, detail: at}
	}
	if rs.parseErr != nil {
		return rs.parseErr
	}
	if !v.m.get("record_count").intEquals(int64(rs.lines)) {
		at.Message = fmt.Sprintf("records.jsonl has %d records", rs.lines)
		return &failure{msg: msgRecordCount, detail: at}
	}
	if !v.m.get("last_sequence").intEquals(int64(rs.lines)) {
		at.Message = fmt.Sprintf("records.jsonl has %d records", rs.lines)
		return &failure{msg: msgLastSequence, detail: at}
	}
	return rs.recErr
}

// checkArtifacts is items 20–22.
func (v *verifier) checkArtifacts() *failure {
	catalog := v.m.get("artifacts")
	at := Detail{Member: memberManifest}
	if !catalog.isObject() {
		at.Message = "artifacts is not an object"
		return &failure{msg: msgCatalog, detail: at}
	}
	// The reference collects references from the canonical JSON of all
	// records: json.dumps fails on an infinity first, then the UTF-8
	// encoding of its result on a lone surrogate.
	if v.recs.overflow != nil {
		return v.recs.overflow
	}
	if v.recs.surrogate != nil {
		return v.recs.surrogate
	}
	if why := catalogMismatch(catalog, v.recs.refs); why != "" {
		at.Message = why
		return &failure{msg: msgCatalog, detail: at}
	}
	included := make(map[string]bool)
	var f *failure
	catalog.members(func(key, desc jv) bool {
		k, _ := key.str()
		member := artifactPrefix + k
		at := Detail{Member: member}
		if !desc.isObject() {
			f = &failure{msg: msgArtifactDescriptor, detail: at}
			return false
		}
		status := desc.get("status")
		if status.isStr("included") {
			if !desc.get("path").isStr(member) || v.digests[member] == "" {
				f = &failure{msg: msgMissingArtifact, detail: at}
				return false
			}
			if v.digests[member] != k {
				at.Message = "SHA-256 of the member differs from its key"
				f = &failure{msg: msgArtifactChecksum, detail: at}
				return false
			}
			included[member] = true
			return true
		}
		if !status.strIn("missing", "corrupt", "omitted") {
			f = &failure{msg: msgArtifactStatus, detail: at}
			return false
		}
		if v.digests[member] != "" {
			f = &failure{msg: msgExcludedPresent, detail: at}
			return false
		}
		return true
	})
	if f != nil {
		return f
	}
	for i := range v.z.entries {
		name := v.z.entries[i].name
		if name != memberManifest && name != memberRecords && !included[name] {
			return &failure{msg: msgUnreferenced, detail: Detail{Member: printableName(name)}}
		}
	}
	if v.keep {
		for name := range v.artifacts {
			if !included[name] {
				delete(v.artifacts, name)
			}
		}
	}
	return nil
}

// catalogMismatch compares the catalog's key set with the references
// the records hold (item 20) and says how they differ, or returns "" when
// they are equal. Catalog keys are distinct (the parser refuses repeated
// keys), so the sets are equal when they have as many elements and every
// key is a reference; the message names the first difference either way.
func catalogMismatch(catalog jv, refs map[string]struct{}) string {
	listed := make(map[string]struct{}, len(refs))
	why := ""
	catalog.members(func(key, _ jv) bool {
		k, _ := key.str()
		if _, ok := refs[k]; !ok {
			why = "catalog lists " + clip(k) + " which no record references"
			return false
		}
		listed[k] = struct{}{}
		return true
	})
	if why != "" || len(listed) == len(refs) {
		return why
	}
	for _, k := range slices.Sorted(maps.Keys(refs)) {
		if _, ok := listed[k]; !ok {
			return "a record references artifact://" + k + " which the catalog does not list"
		}
	}
	return ""
}

// checkUnresolved is item 23.
func (v *verifier) checkUnresolved() *failure {
	ops := v.m.get("unresolved_operations")
	at := Detail{Member: memberManifest}
	if !ops.isArray() {
		return &failure{msg: msgUnresolvedOps, detail: at}
	}
	ok := true
	ops.elems(func(op jv) bool {
		ok = op.isObject() && op.get("execution_key").isString() &&
			op.get("status").strIn("started", "uncertain") && op.get("attempt").isInt()
		return ok
	})
	if !ok {
		return &failure{msg: msgUnresolvedOp, detail: at}
	}
	return nil
}
