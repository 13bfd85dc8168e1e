package hxbundle

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"hxd/internal/journal"
)

// records.jsonl (REFERENCE §7.3 items 15–19, and the reference collection
// of item 20) is checked as it streams: the goroutine that reads and
// hashes the member splits it into lines and hands batches of lines to
// parser goroutines; a sequencer goroutine takes the parsed batches in
// order and applies what depends on the records before (line count,
// duplicate ids, the first failure, completeness). The result is the
// reference's: the first failure of each step, reported by checkRecords
// in step order once every member has been read.

// A batch holds up to batchLines lines or about batchBytes bytes.
const (
	batchBytes = 256 << 10
	batchLines = 1024
)

// lineResult is what a parser found in one line.
type lineResult struct {
	parseErr *failure
	// pre is the first failure before the id check (item 19: not an
	// object, version, seq); post the first after it.
	pre, post *failure
	id        string
	idOK      bool   // id is a non-empty string
	ctx       Detail // names the record when post is set
	refs      []string
	rec       trackedRecord
	// A record that json.loads reads but json.dumps or the UTF-8 encoding
	// of its result refuses, when the reference collects artifact
	// references (item 20): an overflowing float literal (ValueError), a
	// lone surrogate (UnicodeEncodeError).
	overflow, surrogate *failure
	// strict is hxd's own rejection of a line the reference reads
	// (DESIGN §8), reported once every check of the reference passed.
	strict *failure
}

// recordBatch is a run of consecutive lines.
type recordBatch struct {
	first int    // record number of the first line
	data  []byte // the lines back to back
	ends  []int  // end of each line in data
	res   []lineResult
	done  chan struct{}
}

func (b *recordBatch) line(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.data[start:b.ends[i]]
}

// batches are pooled: at most about three per parser are in flight.
var batches = sync.Pool{New: func() any {
	return &recordBatch{data: make([]byte, 0, batchBytes+4<<10)}
}}

// recordStream checks records.jsonl. feed and finish are called by one
// goroutine; the results may be read after finish returns.
type recordStream struct {
	v     *verifier
	lines int

	tooMany  bool
	parseErr *failure
	recErr   *failure

	ids  map[string]struct{}
	refs map[string]struct{}
	// The first valid record's failures at item 20, and hxd's own
	// rejection (lineResult).
	overflow, surrogate, strict *failure
	comp                        *tracker
	raw                         [][]byte // playback

	split   lineSplitter
	cur     *recordBatch
	work    chan *recordBatch
	order   chan *recordBatch
	workers sync.WaitGroup
	seqDone chan struct{}
	started bool
}

func newRecordStream(v *verifier) *recordStream {
	s := &recordStream{v: v, ids: map[string]struct{}{}, refs: map[string]struct{}{}, comp: newTracker()}
	s.split.onLine = s.line
	return s
}

// start launches the parsers and the sequencer.
func (s *recordStream) start() {
	s.started = true
	n := max(runtime.GOMAXPROCS(0), 1)
	s.work = make(chan *recordBatch, n)
	s.order = make(chan *recordBatch, 2*n)
	s.seqDone = make(chan struct{})
	for range n {
		s.workers.Go(func() {
			p := &lineParser{v: s.v}
			for b := range s.work {
				p.batch(b)
				close(b.done)
			}
		})
	}
	go func() {
		defer close(s.seqDone)
		for b := range s.order {
			<-b.done
			s.apply(b)
			if cap(b.data) <= 2*batchBytes { // not grown by a long line
				clear(b.res)
				batches.Put(b)
			}
		}
	}()
}

// feed takes the next bytes of records.jsonl.
func (s *recordStream) feed(b []byte) { s.split.feed(b) }

// finish ends the member and waits for every line to be checked.
func (s *recordStream) finish() {
	s.split.finish()
	if s.cur != nil && len(s.cur.ends) > 0 {
		s.dispatch()
	}
	if !s.started {
		return
	}
	close(s.work)
	close(s.order)
	s.workers.Wait()
	<-s.seqDone
}

// line takes one line (the reference's splitlines).
func (s *recordStream) line(b []byte) {
	s.lines++
	if s.lines > s.v.lim.MaxRecords {
		s.tooMany = true
	}
	if s.tooMany {
		return // only the count matters now
	}
	if s.cur == nil {
		s.cur = batches.Get().(*recordBatch)
		s.cur.data, s.cur.ends, s.cur.res = s.cur.data[:0], s.cur.ends[:0], s.cur.res[:0]
		s.cur.first = s.lines
	}
	s.cur.data = append(s.cur.data, b...)
	s.cur.ends = append(s.cur.ends, len(s.cur.data))
	if len(s.cur.data) >= batchBytes || len(s.cur.ends) >= batchLines {
		s.dispatch()
	}
}

func (s *recordStream) dispatch() {
	if !s.started {
		s.start()
	}
	b := s.cur
	s.cur = nil
	b.done = make(chan struct{})
	s.order <- b
	s.work <- b
}

// apply takes the results of a batch in record order.
func (s *recordStream) apply(b *recordBatch) {
	for i := range b.res {
		if s.parseErr != nil {
			return // later lines cannot change the outcome
		}
		r := &b.res[i]
		if r.parseErr != nil {
			s.parseErr = r.parseErr
			return
		}
		if s.v.keep {
			s.raw = append(s.raw, bytes.Clone(b.line(i)))
		}
		if s.recErr != nil {
			continue // parse errors in later lines still come first
		}
		if r.pre != nil {
			s.recErr = r.pre
			continue
		}
		if _, dup := s.ids[r.id]; !r.idOK || dup {
			d := r.ctx
			if r.post == nil { // the record is otherwise valid: name it from its fields
				d = Detail{Member: memberRecords, Seq: r.rec.seq, Kind: r.rec.kind, StepID: clip(r.rec.stepID),
					AttemptID: clip(r.rec.attemptID), ExecutionKey: clip(r.rec.executionKey)}
			}
			s.recErr = &failure{msg: msgRecordIdentity, detail: d}
			continue
		}
		s.ids[r.id] = struct{}{}
		if r.post != nil {
			s.recErr = r.post
			continue
		}
		// A valid record: artifact references and completeness.
		if s.overflow == nil {
			s.overflow = r.overflow
		}
		if s.surrogate == nil {
			s.surrogate = r.surrogate
		}
		if s.strict == nil {
			s.strict = r.strict
		}
		for _, k := range r.refs {
			s.refs[k] = struct{}{}
		}
		s.comp.add(&r.rec)
	}
}

// lineParser parses and checks lines; each parser goroutine has its own.
type lineParser struct {
	v       *verifier
	doc     jsonDoc
	scratch []byte
}

func (p *lineParser) batch(b *recordBatch) {
	n := len(b.ends)
	if cap(b.res) < n {
		b.res = make([]lineResult, n)
	}
	b.res = b.res[:n]
	for i := range n {
		b.res[i] = lineResult{}
		p.check(&b.res[i], b.line(i), b.first+i)
	}
}

// check parses one line and runs the checks of item 19 that do not
// depend on other records.
func (p *lineParser) check(r *lineResult, line []byte, seq int) {
	if e := p.doc.parse(line); e != nil {
		r.parseErr = &failure{msg: e.msg, detail: Detail{Member: memberRecords, Seq: seq,
			Message: fmt.Sprintf("line %d, byte %d: %s", seq, e.off, e.why)}}
		return
	}
	item := p.doc.root()
	if !item.isObject() {
		r.pre = &failure{msg: msgInvalidRecord, detail: Detail{Member: memberRecords, Seq: seq}}
		return
	}
	fail := func(msg, why string) *failure {
		d := recordContext(item, seq)
		d.Message = why
		return &failure{msg: msg, detail: d}
	}
	f := scanRecord(item)
	if !f.version.intEquals(1) {
		r.pre = fail(msgJournalVersion, "")
		return
	}
	if !f.seq.intEquals(int64(seq)) {
		r.pre = fail(msgSequence, fmt.Sprintf("expected seq %d", seq))
		return
	}
	r.id, r.idOK = f.id.str()
	r.idOK = r.idOK && r.id != ""
	r.post = p.checkAfterID(r, f, seq, fail)
	if r.post != nil {
		r.ctx = recordContext(item, seq) // for an identity failure
		return
	}
	d := &p.doc
	failAt := func(msg, format string, args ...any) *failure {
		at := recordContext(item, seq)
		at.Message = fmt.Sprintf("line %d, ", seq) + fmt.Sprintf(format, args...)
		return &failure{msg: msg, detail: at}
	}
	if d.encoding != "" {
		e := d.strictOnly()
		r.strict = failAt(e.msg, "byte %d: %s", e.off, e.why)
	}
	if d.overflow > 0 {
		r.overflow = failAt(generic(pyValueError), "byte %d: float literal overflows float64 (%s)%s; the reference reads an infinity, which json.dumps refuses",
			d.base+d.overflow-1, msgNonFinite, d.decodedNote())
	}
	if d.rawSurrogate > 0 && (d.encoding == "" || d.encoding == "utf-8-sig") {
		r.surrogate = failAt(generic(pyUnicodeEncodeError), "byte %d: UTF-8-encoded surrogate; the reference decodes it, then cannot encode it as UTF-8",
			d.base+d.rawSurrogate-1)
	} else if d.surrogate {
		r.surrogate = failAt(generic(pyUnicodeEncodeError), "record holds a lone surrogate, which cannot be encoded as UTF-8")
	}
	if r.overflow == nil && r.surrogate == nil {
		r.refs = appendRefs(nil, d, d.src, &p.scratch)
	}
}

// checkAfterID is the rest of item 19 and collects what the
// completeness pass needs.
func (p *lineParser) checkAfterID(r *lineResult, f *recordFields, seq int, fail func(msg, why string) *failure) *failure {
	v := p.v
	if !f.runID.isStr(v.runID) || !f.sessionID.isStr(v.sessionID) {
		return fail(msgMixedIdentity, "")
	}
	kind, ok := f.kind.str()
	if !ok || !journal.Kind(kind).Valid() {
		return fail(msgUnknownKind, "")
	}
	if !f.capture.strIn("present", "redacted", "omitted") {
		return fail(msgCapture, "")
	}
	capture, _ := f.capture.str()
	payload := f.payload
	if !payload.exists() || (capture == "omitted" && payload.kind() != jsonNull) {
		return fail(msgOmittedPayload, "")
	}
	if capture == capturePresent && !payload.isObject() {
		return fail(msgPayload, "")
	}
	for _, m := range []struct {
		v    jv
		name string
	}{{f.stepID, "step_id"}, {f.attemptID, "attempt_id"}, {f.recordedAt, "recorded_at"}} {
		if !m.v.isString() {
			return fail(msgMetadata, m.name+" is not a string")
		}
	}
	ek := f.executionKey
	if !ek.isNone() && !ek.isString() {
		return fail(msgExecutionKey, "")
	}
	if strings.HasPrefix(kind, "tool.") && !pyTruthy(ek) {
		return fail(msgToolKey, "")
	}
	if capture == capturePresent && kind == string(journal.KindEvent) {
		if class := decodeRunEvent(payload); class != "" {
			return fail(generic(class), "event payload is not a valid RunEvent")
		}
		if !payload.get("run_id").isStr(v.runID) || !payload.get("session_id").isStr(v.sessionID) {
			return fail(msgEventIdentity, "")
		}
	}
	t := &r.rec
	*t = trackedRecord{seq: seq, kind: kind, capture: capture, hasExecKey: ek.exists()}
	t.stepID, _ = f.stepID.str()
	t.attemptID, _ = f.attemptID.str()
	t.executionKey, _ = ek.str()
	switch kind {
	case "tool.resolved":
		t.resolvedWithResult = capture == capturePresent && !payload.get("result").isNone()
	case "checkpoint":
		if capture == capturePresent {
			t.payload = bytes.Clone(payload.raw())
		}
	}
	return nil
}

// recordContext names a record for a Detail from whatever of its fields
// are strings.
func recordContext(item jv, seq int) Detail {
	d := Detail{Member: memberRecords, Seq: seq}
	if k, ok := item.get("kind").str(); ok && journal.Kind(k).Valid() {
		d.Kind = k
	}
	d.StepID, _ = item.get("step_id").str()
	d.AttemptID, _ = item.get("attempt_id").str()
	d.ExecutionKey, _ = item.get("execution_key").str()
	d.StepID, d.AttemptID, d.ExecutionKey = clip(d.StepID), clip(d.AttemptID), clip(d.ExecutionKey)
	return d
}

// recordFields are the top-level fields of a record the checks read
// (absent when missing), found in one pass over its members.
type recordFields struct {
	version, seq, id, runID, sessionID, kind, capture, payload,
	stepID, attemptID, recordedAt, executionKey jv
}

func scanRecord(item jv) *recordFields {
	f := &recordFields{absent, absent, absent, absent, absent, absent, absent, absent, absent, absent, absent, absent}
	var buf []byte
	item.members(func(key, val jv) bool {
		name := key.raw()
		if key.escaped() {
			buf = key.appendText(buf[:0])
			name = buf
		}
		var slot *jv
		switch string(name) {
		case "version":
			slot = &f.version
		case "seq":
			slot = &f.seq
		case "id":
			slot = &f.id
		case "run_id":
			slot = &f.runID
		case "session_id":
			slot = &f.sessionID
		case "kind":
			slot = &f.kind
		case "capture":
			slot = &f.capture
		case "payload":
			slot = &f.payload
		case "step_id":
			slot = &f.stepID
		case "attempt_id":
			slot = &f.attemptID
		case "recorded_at":
			slot = &f.recordedAt
		case "execution_key":
			slot = &f.executionKey
		default:
			return true
		}
		*slot = val
		return true
	})
	return f
}

// appendRefs appends the artifact references of a parsed record line:
// every artifact://<64 lowercase hex> not followed by another hex digit
// in the canonical JSON of the record (REFERENCE §5.6). References can
// only lie inside strings, and canonical serialization changes a string
// only through escapes; of those only \uXXXX and \/ can spell or hide
// characters of a reference. A line without them is searched as is;
// otherwise each string is decoded first (into *scratch).
func appendRefs(dst []string, d *jsonDoc, line []byte, scratch *[]byte) []string {
	if !d.codeEscape {
		return findRefs(dst, line)
	}
	for v := range d.doc.Values() {
		if v.Kind() != journal.JSONString {
			continue
		}
		if !v.Escaped() {
			dst = findRefs(dst, v.Raw())
			continue
		}
		*scratch = v.AppendText((*scratch)[:0])
		dst = findRefs(dst, *scratch)
	}
	return dst
}

var refPrefix = []byte("artifact://")

// findRefs appends the matches of artifact://([a-f0-9]{64})(?![a-f0-9])
// in b. It looks for slashes, which are rarer than the prefix's first
// letter.
func findRefs(dst []string, b []byte) []string {
	const pre = len("artifact:/") // the bytes before the second slash
	for i := pre; i < len(b); {
		k := bytes.IndexByte(b[i:], '/')
		if k < 0 {
			return dst
		}
		i += k // b[i] is a second slash candidate
		if !bytes.Equal(b[i-pre:i+1], refPrefix) {
			i++
			continue
		}
		h := b[i+1:]
		if len(h) >= 64 && allLowerHex(h[:64]) && (len(h) == 64 || !isLowerHex(h[64])) {
			dst = append(dst, string(h[:64]))
			i += 1 + 64 + pre // a match cannot start inside another
			continue
		}
		i++
	}
	return dst
}

func allLowerHex(b []byte) bool {
	for _, c := range b {
		if !isLowerHex(c) {
			return false
		}
	}
	return true
}

// lineSplitter splits a stream like bytes.splitlines: lines end at "\n",
// "\r\n" or "\r", and a final line break does not start an empty line.
type lineSplitter struct {
	carry     []byte
	pendingCR bool // the previous chunk ended with '\r'
	onLine    func([]byte)
}

func (s *lineSplitter) feed(b []byte) {
	if len(b) == 0 {
		return
	}
	if s.pendingCR {
		s.pendingCR = false
		if b[0] == '\n' {
			b = b[1:]
		}
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		limit := i
		if limit < 0 {
			limit = len(b)
		}
		if j := bytes.IndexByte(b[:limit], '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			s.carry = append(s.carry, b...)
			return
		}
		line := b[:i]
		if len(s.carry) > 0 {
			s.carry = append(s.carry, line...)
			line = s.carry
		}
		s.onLine(line)
		s.carry = s.carry[:0]
		if b[i] == '\r' {
			if i+1 == len(b) {
				s.pendingCR = true
			} else if b[i+1] == '\n' {
				i++
			}
		}
		b = b[i+1:]
	}
}

func (s *lineSplitter) finish() {
	if len(s.carry) > 0 {
		s.onLine(s.carry)
		s.carry = s.carry[:0]
	}
}
