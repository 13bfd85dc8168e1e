package hxbundle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"hxd/internal/journal"
)

// ErrLimitExceeded matches every export failure caused by Limits; the
// error's text is the reference's message (see LimitError).
var ErrLimitExceeded = errors.New("bundle limit exceeded")

// ErrInvalidPolicy matches every Policy.Validate failure.
var ErrInvalidPolicy = errors.New("invalid export policy")

// The reference's limit messages (REFERENCE §5.2, §5.7).
const (
	// MsgRecordLimit: the journal holds more than MaxRecords records.
	MsgRecordLimit = "Incident exceeds the configured record limit"
	// MsgMemberLimit: more than MaxMembers members, or a member above
	// MaxMemberBytes.
	MsgMemberLimit = "Incident exceeds member limits"
	// MsgByteLimit: the members together, or the archive, above MaxBytes.
	MsgByteLimit = "Incident exceeds byte limit"
)

// LimitError is an export refused by Limits. Its Error text is exactly the
// reference's message (one of the Msg constants) and it matches
// ErrLimitExceeded with errors.Is.
type LimitError struct {
	// Message is MsgRecordLimit, MsgMemberLimit or MsgByteLimit.
	Message string
}

// Error returns the reference's message.
func (e *LimitError) Error() string { return e.Message }

// Is makes errors.Is(err, ErrLimitExceeded) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimitExceeded }

func newLimitError(msg string) error { return &LimitError{Message: msg} }

// Policy says what an export may contain (REFERENCE §5.3, DESIGN §4).
// The zero Policy is the reference's default: metadata only.
type Policy struct {
	// IncludePayloads exports payloads (auto-redacted, then Redact rules,
	// then auto-redacted again). Optional; default: false, every payload
	// is null with capture "omitted".
	IncludePayloads bool `json:"include_payloads"`
	// IncludeArtifacts adds the referenced artifacts' bytes as members;
	// requires IncludePayloads. Optional; default: false, artifacts are
	// listed as omitted.
	IncludeArtifacts bool `json:"include_artifacts"`
	// Redact are declarative redaction rules applied in order. Optional.
	Redact []Rule `json:"redact,omitempty"`
	// Limits bound the bundle. A zero field takes its DefaultLimits value.
	Limits Limits `json:"limits"`
	// Signer, when set, signs the manifest (hxd.signature). Optional;
	// never read from JSON.
	Signer *Signer `json:"-"`
}

// EffectiveLimits returns p.Limits with zero fields set to DefaultLimits.
func (p Policy) EffectiveLimits() Limits {
	l := p.Limits
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	if l.MaxMemberBytes == 0 {
		l.MaxMemberBytes = DefaultLimits.MaxMemberBytes
	}
	if l.MaxRecords == 0 {
		l.MaxRecords = DefaultLimits.MaxRecords
	}
	if l.MaxMembers == 0 {
		l.MaxMembers = DefaultLimits.MaxMembers
	}
	return l
}

// ZIP without ZIP64 (the writer never emits extra fields) holds at most
// 4 GiB - 1 bytes and 65,535 entries, but archive/zip writes a ZIP64 end
// record from 65,535 entries on (zipfile only beyond): one less keeps
// every bundle ZIP64-free.
const (
	exportMaxZipBytes   = math.MaxUint32
	exportMaxZipMembers = math.MaxUint16 - 1
)

// Validate reports every problem of p, each matching ErrInvalidPolicy:
// IncludeArtifacts without IncludePayloads (the reference's "Artifact
// export also requires include_payloads=True"), an invalid rule (unknown
// kind or action, malformed pointer or value, a pattern that does not
// compile, a value or replacement where none is taken) and invalid limits
// (negative, also matching ErrInvalidLimits, or beyond what a ZIP without
// ZIP64 holds: 4 GiB - 1 bytes, 65,534 members).
func (p Policy) Validate() error {
	_, err := p.compile()
	return err
}

// compile validates p and compiles its rules.
func (p Policy) compile() ([]compiledRule, error) {
	var errs []error
	if p.IncludeArtifacts && !p.IncludePayloads {
		errs = append(errs, fmt.Errorf("%w: Artifact export also requires include_payloads=True", ErrInvalidPolicy))
	}
	rules := make([]compiledRule, 0, len(p.Redact))
	for i, r := range p.Redact {
		c, err := r.compile()
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: redact[%d]: %w", ErrInvalidPolicy, i, err))
			continue
		}
		rules = append(rules, c)
	}
	l := p.EffectiveLimits()
	if err := l.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidPolicy, err))
	} else if l.MaxBytes > exportMaxZipBytes || l.MaxMembers > exportMaxZipMembers {
		errs = append(errs, fmt.Errorf("%w: limits: at most %d bytes and %d members fit a ZIP without ZIP64",
			ErrInvalidPolicy, int64(exportMaxZipBytes), exportMaxZipMembers))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return rules, nil
}

// AgentRef names the agent of the exported session.
type AgentRef struct {
	// Name is the agent's registered name.
	Name string `json:"name"`
	// Version is the agent's registered version.
	Version string `json:"version"`
}

// UnresolvedOperation is a tool entry left started or uncertain.
type UnresolvedOperation struct {
	// ExecutionKey identifies the tool call.
	ExecutionKey string `json:"execution_key"`
	// Status is "started" or "uncertain".
	Status string `json:"status"`
	// Attempt is the entry's attempt number.
	Attempt int `json:"attempt"`
}

// RunInfo is the run state read in the same consistent cut as the
// records (REFERENCE §5.2); it fills the manifest.
type RunInfo struct {
	// RunID identifies the run; every record must carry it.
	RunID string
	// SessionID identifies the run's session; every record must carry it.
	SessionID string
	// Status is the run's status at export (one of the six).
	Status string
	// Phase is the run's phase at export.
	Phase string
	// Agent is the session's agent, or nil (manifest "agent": null).
	Agent *AgentRef
	// SDKVersion is the writer's version (hxd's), manifest "sdk_version".
	SDKVersion string
	// ExportedAt is the bundle's creation time: manifest "created_at" and
	// the ZIP members' DOS times (in UTC). Optional; default: time.Now().
	ExportedAt time.Time
	// Unresolved are the state's tool entries with status started or
	// uncertain, in state order.
	Unresolved []UnresolvedOperation
}

// Source gives Build the records and artifacts of one run.
type Source interface {
	// Records calls fn for every stored record of the run, one at a time
	// in seq order (1, 2, …), and returns the first error fn returns
	// (wrapped or not), stopping there. The record's byte slices may be
	// reused once fn returns. Implementations should read one consistent
	// snapshot; reading MaxRecords+1 records is enough to fail the limit.
	Records(ctx context.Context, fn func(journal.Record) error) error
	// OpenArtifact opens the bytes of the artifact named by its SHA-256
	// hex digest. Any error, from opening or reading, makes the artifact
	// "missing" (unless ctx is done, which aborts the export).
	OpenArtifact(ctx context.Context, sha256 string) (io.ReadCloser, error)
}

// PythonVersion is the manifest's "python_version" written by hxd.
const PythonVersion = "n/a"

// Archive is a finished bundle spooled in a private temporary file. Its
// size and content are final: every limit has been checked and nothing
// has been sent yet. Size, WriteTo, ReaderAt and Publish may be called
// any number of times, also concurrently; Close must come last.
type Archive struct {
	f    *os.File
	size int64

	closeOnce sync.Once
	closeErr  error

	// hook, when set by tests, runs at named publish steps and may fail them.
	hook func(step string) error
}

// Size is the exact number of bytes WriteTo writes.
func (a *Archive) Size() int64 { return a.size }

// WriteTo streams the archive to w. It reads through its own file
// descriptor, so that concurrent calls are safe and the kernel can copy
// without user-space buffers where w allows it (sendfile to a TCP
// connection or an http.ResponseWriter, copy_file_range to a file).
func (a *Archive) WriteTo(w io.Writer) (int64, error) {
	r, err := a.open()
	if err != nil {
		return 0, err
	}
	// A read-only descriptor: closing it cannot lose bytes, and the copy's
	// own result says whether w got them all.
	defer func() { _ = r.Close() }()
	// The buffer serves writers without ReadFrom (fewer, larger reads).
	n, err := io.CopyBuffer(w, io.LimitReader(r, a.size), make([]byte, 256<<10))
	if err == nil && n != a.size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return n, fmt.Errorf("write bundle: %w", err)
	}
	return n, nil
}

// open opens the spool for reading from its start.
func (a *Archive) open() (*os.File, error) {
	r, err := os.Open(a.f.Name())
	if err != nil {
		return nil, fmt.Errorf("open bundle spool: %w", err)
	}
	return r, nil
}

// ReaderAt gives random access to the archive's Size bytes, e.g. for
// Verify.
func (a *Archive) ReaderAt() io.ReaderAt { return io.NewSectionReader(a.f, 0, a.size) }

// Close removes the spool file. It is idempotent.
//
// The file's name is gone when Close returns. Its data is released in the
// background: unlinking a file that is still open only drops the name, and
// the page cache is freed (several milliseconds for a large bundle) when
// the last descriptor closes, which Close leaves to another goroutine.
// Descriptors opened by WriteTo calls still running keep the data until
// they finish.
func (a *Archive) Close() error {
	a.closeOnce.Do(func() {
		if err := os.Remove(a.f.Name()); err == nil || errors.Is(err, os.ErrNotExist) {
			// Only the spool's own descriptor is left; an error closing a
			// file whose name is gone could not matter to anyone.
			go func() { _ = a.f.Close() }()
			return
		}
		// Some systems (Windows) refuse to remove an open file: close it
		// first, the slow way.
		err := a.f.Close()
		if rmErr := os.Remove(a.f.Name()); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			err = errors.Join(err, rmErr)
		}
		if err != nil {
			a.closeErr = fmt.Errorf("remove bundle spool: %w", err)
		}
	})
	return a.closeErr
}

// Build exports one run as a format-v1 bundle (REFERENCE §5, §6) into a
// private temporary file created in dir (mode 0600; dir "" means
// os.TempDir()) and returns it unsent. Memory use does not grow with the
// number or size of records and artifacts: records are encoded in chunks
// (on up to GOMAXPROCS goroutines, output in seq order) and spooled once
// while CRC-32, SHA-256 and sizes are computed; artifacts are streamed the
// same way; the ZIP headers are then written around the spooled data. The
// spool never grows much beyond MaxBytes.
//
// Records are exported in seq order as canonical JSON lines with payloads
// processed per p (metadata only by default; see Policy and Rule).
// Limits are checked in the reference's order: more than MaxRecords
// records (MsgRecordLimit); more than MaxMembers members or a member above
// MaxMemberBytes (MsgMemberLimit); member bytes or the archive above
// MaxBytes (MsgByteLimit). Such failures return a *LimitError matching
// ErrLimitExceeded, and nothing is left behind. An invalid p returns an
// error matching ErrInvalidPolicy. A record out of seq order or of
// another run, a payload that is not valid JSON, a failing source or a
// done ctx also fail the export.
//
// Like the reference (§5.7 step 3), callers should verify the result
// before sending or publishing it:
//
//	if r := Verify(a.ReaderAt(), a.Size(), p.EffectiveLimits()); !r.Valid { … }
//
// The caller owns the returned Archive and must Close it.
func Build(ctx context.Context, info RunInfo, src Source, p Policy, dir string) (*Archive, error) {
	rules, err := p.compile()
	if err != nil {
		return nil, err
	}
	if info.RunID == "" || info.SessionID == "" || info.Status == "" || info.Phase == "" {
		return nil, errors.New("build bundle: run info needs run id, session id, status and phase")
	}
	if info.ExportedAt.IsZero() {
		info.ExportedAt = time.Now()
	}
	f, err := os.CreateTemp(dir, "hxd-export-*.spool")
	if err != nil {
		return nil, fmt.Errorf("create bundle spool: %w", err)
	}
	a := &Archive{f: f}
	b := &exportBuilder{
		info:   info,
		src:    src,
		policy: p,
		limits: p.EffectiveLimits(),
		rules:  rules,
		out:    &spoolWriter{f: f},
	}
	b.out.limit = b.limits.MaxBytes
	if err := b.build(ctx); err != nil {
		_ = a.Close()
		return nil, err
	}
	a.size = b.out.off
	return a, nil
}

// exportBuilder holds the state of one Build; the Build's ctx is passed
// to each step.
type exportBuilder struct {
	info   RunInfo
	src    Source
	policy Policy
	limits Limits
	rules  []compiledRule
	out    *spoolWriter

	entries   []exportEntry
	refs      map[string]struct{}
	artifacts map[string]exportArtifactDescriptor
	records   int
	lastSeq   int64
}

func (b *exportBuilder) build(ctx context.Context) error {
	if err := b.spoolRecords(ctx); err != nil {
		return err
	}
	if err := b.spoolArtifacts(ctx); err != nil {
		return err
	}
	man, err := b.manifest()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("build bundle: %w", err)
	}
	mEntry := exportEntry{name: exportManifestMember, offset: b.out.off, size: int64(len(man)), crc: crc32.ChecksumIEEE(man)}
	entries := append(slices.Clip(b.entries), mEntry)
	if len(entries) > b.limits.MaxMembers || mEntry.size > b.limits.MaxMemberBytes {
		return newLimitError(MsgMemberLimit)
	}
	total := int64(0)
	for _, e := range entries {
		total += e.size
	}
	if total > b.limits.MaxBytes {
		return newLimitError(MsgByteLimit)
	}
	return b.finish(entries, man)
}

// finish writes the local headers in front of the spooled data, the
// manifest, the central directory and the end record, and refuses an
// archive above MaxBytes (the spool has then dropped what lies beyond).
func (b *exportBuilder) finish(entries []exportEntry, man []byte) error {
	date, tm := dosDateTime(b.info.ExportedAt)
	size, err := writeZip(b.out, entries, man, date, tm)
	if err != nil {
		return err
	}
	if size > b.limits.MaxBytes || b.out.truncated {
		return newLimitError(MsgByteLimit)
	}
	if err := b.out.flush(); err != nil {
		return fmt.Errorf("write bundle spool: %w", err)
	}
	// Drop whatever a rolled-back artifact left beyond the end.
	if err := b.out.f.Truncate(size); err != nil {
		return fmt.Errorf("write bundle spool: %w", err)
	}
	return nil
}

// spoolWriter writes sequentially at off in f while the file stays
// within limit bytes; beyond, it only counts: the archive then exceeds
// MaxBytes, the export is refused, and the discarded bytes are never
// needed. The spool file therefore never grows much beyond MaxBytes.
//
// Bytes reach the file in aligned chunks of spoolChunk bytes: they are
// collected in buf until the next chunk boundary (or a seek or flush).
// The page cache takes large aligned writes for a fraction of the CPU
// time that many small unaligned ones cost (the records arrive in pieces
// of about recordJobBytes, artifacts in io.Copy's 32 KiB).
type spoolWriter struct {
	f         *os.File
	off       int64 // the logical end: every byte before it is written or in buf
	limit     int64
	truncated bool  // some bytes at or after discardAt were dropped
	discardAt int64 // offset of the first dropped byte
	buf       []byte
	bufOff    int64 // the offset of buf[0]
	err       error // the first error writing f, returned from then on
}

// spoolChunk is the size and alignment of the spool's writes.
const spoolChunk = 1 << 20

// Write implements io.Writer; it fails only if the spool file does.
func (w *spoolWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	if w.truncated || w.off+int64(n) > w.limit {
		if !w.truncated {
			if err := w.flush(); err != nil {
				return 0, err
			}
			w.truncated, w.discardAt = true, w.off
		}
		w.off += int64(n)
		return n, nil
	}
	if w.buf == nil {
		w.buf = make([]byte, 0, spoolChunk)
	}
	for len(p) > 0 {
		if len(w.buf) == 0 {
			w.bufOff = w.off
		}
		k := min(len(p), spoolChunk-int(w.off%spoolChunk))
		w.buf = append(w.buf, p[:k]...)
		w.off += int64(k)
		p = p[k:]
		if w.off%spoolChunk == 0 {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// flush writes the collected bytes and returns the first error writing f.
func (w *spoolWriter) flush() error {
	if w.err == nil && len(w.buf) > 0 {
		if _, err := w.f.WriteAt(w.buf, w.bufOff); err != nil {
			w.err = err
		}
	}
	w.buf = w.buf[:0]
	return w.err
}

// seek moves the write position back (dropping a rejected artifact) or
// forward (reserving a local header). Collected bytes are written first;
// an error doing so is returned by the next Write or flush.
func (w *spoolWriter) seek(off int64) {
	_ = w.flush()
	w.off = off
	if w.truncated && off <= w.discardAt {
		w.truncated = false // everything dropped lay beyond off
	}
}

// spoolRecords encodes every record into records.jsonl, in parallel but
// in seq order, and spools it behind a reserved local header.
func (b *exportBuilder) spoolRecords(ctx context.Context) error {
	e := exportEntry{name: exportRecordsMember, offset: b.out.off}
	b.out.seek(e.dataOffset())
	pipe := newRecordPipeline(b.out, b.policy.IncludePayloads, b.rules, b.limits.MaxMemberBytes)
	// Stops the workers on an early return, which already carries its own
	// error; the path that finishes checks close's error below.
	defer func() { _ = pipe.close() }()

	job := pipe.newJob()
	var (
		countOnly bool  // the outcome is decided; only the record limit may still come first
		pending   error // that decided outcome, when it is an error
		fnErr     error // the first error fn returned
	)
	fn := func(rec journal.Record) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b.records++
		if b.records > b.limits.MaxRecords {
			return newLimitError(MsgRecordLimit)
		}
		if countOnly {
			return nil
		}
		if err := pipe.failed(); err != nil || pipe.written.Load() > b.limits.MaxMemberBytes {
			countOnly, pending = true, err
			return nil
		}
		if rec.Seq != int64(b.records) {
			return fmt.Errorf("record %d has seq %d: records must come in seq order from 1", b.records, rec.Seq)
		}
		if rec.RunID != b.info.RunID || rec.SessionID != b.info.SessionID {
			return fmt.Errorf("record seq %d belongs to another run or session", rec.Seq)
		}
		b.lastSeq = rec.Seq
		job.add(rec)
		if job.full() {
			pipe.dispatch(job)
			job = pipe.newJob()
		}
		return nil
	}
	err := b.src.Records(ctx, func(rec journal.Record) error {
		if fnErr == nil {
			fnErr = fn(rec)
		}
		return fnErr
	})
	if err != nil || fnErr != nil {
		pipe.release(job)
		if fnErr != nil && (err == nil || errors.Is(err, fnErr)) {
			return fnErr // our own error, e.g. a *LimitError, without the source's context
		}
		return fmt.Errorf("read journal: %w", err)
	}
	pipe.dispatch(job)
	if err := pipe.close(); err != nil {
		return err
	}
	if pending != nil {
		return pending
	}
	if pipe.written.Load() > b.limits.MaxMemberBytes || pipe.refsOverflow {
		return newLimitError(MsgMemberLimit)
	}
	e.size, e.crc, e.sha = pipe.written.Load(), pipe.crc.Sum32(), [32]byte(pipe.sha.Sum(nil))
	b.entries = append(b.entries, e)
	b.refs = pipe.refs
	return nil
}

// recordJob is a chunk of consecutive records on its way through the
// pipeline: copied in by the producer, encoded by a worker, hashed and
// written by the sink.
type recordJob struct {
	recs  []journal.Record // payloads point into arena
	arena []byte
	out   []byte
	err   error
	done  chan struct{}
	// stages counts the sink stages still reading out; the last one to
	// finish frees the job.
	stages atomic.Int32
}

// Chunking: a job is dispatched once it holds this many payload bytes or
// records; the pipeline holds a fixed number of jobs, so memory is bounded
// by roughly jobs × 2 × recordJobBytes plus the largest record.
const (
	recordJobBytes   = 128 << 10
	recordJobRecords = 256
)

func (j *recordJob) add(rec journal.Record) {
	start := len(j.arena)
	j.arena = append(j.arena, rec.Payload...)
	// The source may reuse its buffers once fn returns: keep copies.
	rec.Payload = j.arena[start:len(j.arena):len(j.arena)]
	if rec.ExecutionKey != nil {
		k := *rec.ExecutionKey
		rec.ExecutionKey = &k
	}
	j.recs = append(j.recs, rec)
}

func (j *recordJob) full() bool {
	return len(j.arena) >= recordJobBytes || len(j.recs) >= recordJobRecords
}

// recordPipeline encodes record jobs on GOMAXPROCS workers and hands the
// results, in dispatch order, to two sink goroutines running side by
// side: one computes SHA-256, the other CRC-32, collects artifact
// references and writes the spool.
type recordPipeline struct {
	out     io.Writer
	work    chan *recordJob // to the workers
	ordered chan *recordJob // to the sink, in seq order
	hashed  chan *recordJob // to the SHA-256 stage, in seq order
	free    chan *recordJob
	wg      sync.WaitGroup // workers and sink stages

	// Written by the sink; read by the producer (atomics) or after close.
	written      atomic.Int64
	errFlag      atomic.Pointer[error]
	crc          hash.Hash32
	sha          hash.Hash
	refs         map[string]struct{}
	maxRefs      int
	refsOverflow bool

	closeOnce sync.Once
	closeErr  error
}

// exportMinArtifactEntry is a lower bound on the manifest bytes one artifact
// reference costs ("<64 hex>":{"reason":"export_policy","status":"omitted"},).
const exportMinArtifactEntry = 100

func newRecordPipeline(out io.Writer, include bool, rules []compiledRule, maxMemberBytes int64) *recordPipeline {
	workers := min(max(runtime.GOMAXPROCS(0), 1), 8)
	jobs := 2*workers + 2
	p := &recordPipeline{
		out:     out,
		work:    make(chan *recordJob, jobs),
		ordered: make(chan *recordJob, jobs),
		hashed:  make(chan *recordJob, jobs),
		free:    make(chan *recordJob, jobs),
		crc:     crc32.NewIEEE(),
		sha:     sha256.New(),
		refs:    map[string]struct{}{},
		maxRefs: int(min(maxMemberBytes/exportMinArtifactEntry, math.MaxInt32)),
	}
	for range jobs {
		p.free <- &recordJob{}
	}
	for range workers {
		enc := &exportRecordEncoder{include: include, rules: rules}
		p.wg.Go(func() {
			for j := range p.work {
				j.out, j.err = enc.appendLines(j.out[:0], j.recs)
				close(j.done)
			}
		})
	}
	p.wg.Go(p.sink)
	p.wg.Go(p.hashSink)
	return p
}

// newJob takes an empty job (waiting while all are in flight).
func (p *recordPipeline) newJob() *recordJob {
	j := <-p.free
	if j.arena == nil {
		// Sized for a typical job, so that they rarely grow: the payloads,
		// then the same with the records' other fields.
		j.arena = make([]byte, 0, recordJobBytes+16<<10)
		j.out = make([]byte, 0, recordJobBytes+recordJobBytes/2)
	}
	j.recs, j.arena, j.out, j.err = j.recs[:0], j.arena[:0], j.out[:0], nil
	j.done = make(chan struct{})
	return j
}

// release returns an undispatched job.
func (p *recordPipeline) release(j *recordJob) { p.free <- j }

// dispatch sends j to a worker and queues it for the sink.
func (p *recordPipeline) dispatch(j *recordJob) {
	if len(j.recs) == 0 {
		p.release(j)
		return
	}
	j.stages.Store(2)
	p.work <- j
	p.ordered <- j
	p.hashed <- j
}

// sink checks, scans and writes the encoded jobs in seq order.
func (p *recordPipeline) sink() {
	for j := range p.ordered {
		<-j.done
		if p.errFlag.Load() == nil {
			if err := p.consume(j); err != nil {
				p.errFlag.Store(&err)
			}
		}
		p.stageDone(j)
	}
}

// hashSink computes SHA-256 over the encoded jobs in seq order. After an
// error the digest is never used.
func (p *recordPipeline) hashSink() {
	for j := range p.hashed {
		<-j.done
		if j.err == nil {
			p.sha.Write(j.out)
		}
		p.stageDone(j)
	}
}

// stageDone frees j once both sink stages are done with it.
func (p *recordPipeline) stageDone(j *recordJob) {
	if j.stages.Add(-1) != 0 {
		return
	}
	// Drop buffers that one huge record blew up.
	if cap(j.arena) > 8*recordJobBytes || cap(j.out) > 8*recordJobBytes {
		j.recs, j.arena, j.out = nil, nil, nil
	}
	p.free <- j
}

func (p *recordPipeline) consume(j *recordJob) error {
	if j.err != nil {
		return j.err
	}
	p.crc.Write(j.out)
	if !p.refsOverflow {
		exportScanArtifactRefs(j.out, p.addRef)
	}
	if _, err := p.out.Write(j.out); err != nil {
		return fmt.Errorf("write bundle spool: %w", err)
	}
	p.written.Add(int64(len(j.out)))
	return nil
}

// addRef records an artifact reference. Past maxRefs distinct keys the
// manifest certainly exceeds MaxMemberBytes, so collecting stops there
// and memory stays bounded.
func (p *recordPipeline) addRef(key string) {
	if _, ok := p.refs[key]; ok {
		return
	}
	if len(p.refs) >= p.maxRefs {
		p.refsOverflow = true
		return
	}
	p.refs[key] = struct{}{}
}

// failed returns the first encoding or write error, in seq order.
func (p *recordPipeline) failed() error {
	if e := p.errFlag.Load(); e != nil {
		return *e
	}
	return nil
}

// close drains the pipeline, stops its goroutines and returns failed().
func (p *recordPipeline) close() error {
	p.closeOnce.Do(func() {
		close(p.work)
		close(p.ordered)
		close(p.hashed)
		p.wg.Wait()
		p.closeErr = p.failed()
	})
	return p.closeErr
}

// Member names and reference syntax of format v1 (REFERENCE §6.2, §5.6).
const (
	exportRecordsMember  = "records.jsonl"
	exportManifestMember = "manifest.json"
	exportArtifactsDir   = "artifacts/"
	exportArtifactKeyLen = 64
)

// Record capture statuses (REFERENCE §5.4).
const (
	exportCaptureOmitted  = "omitted"
	exportCapturePresent  = "present"
	exportCaptureRedacted = "redacted"
)

// Artifact descriptor statuses and reasons (REFERENCE §5.6).
const (
	exportArtifactIncluded = "included"
	exportArtifactOmitted  = "omitted"
	exportArtifactMissing  = "missing"
	exportArtifactCorrupt  = "corrupt"
)

// spoolArtifacts resolves every referenced artifact, in ascending key
// order, and spools the included ones as members.
func (b *exportBuilder) spoolArtifacts(ctx context.Context) error {
	keys := make([]string, 0, len(b.refs))
	for k := range b.refs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.artifacts = make(map[string]exportArtifactDescriptor, len(keys))
	for _, key := range keys {
		if !b.policy.IncludeArtifacts {
			b.artifacts[key] = exportArtifactDescriptor{Status: exportArtifactOmitted, Reason: "export_policy"}
			continue
		}
		e, status, err := b.spoolArtifact(ctx, key)
		if err != nil {
			return err
		}
		switch status {
		case exportArtifactIncluded:
			b.artifacts[key] = exportArtifactDescriptor{Status: exportArtifactIncluded, Path: e.name}
			b.entries = append(b.entries, e)
			if e.size > b.limits.MaxMemberBytes || len(b.entries)+1 > b.limits.MaxMembers {
				return newLimitError(MsgMemberLimit)
			}
		case exportArtifactMissing:
			b.artifacts[key] = exportArtifactDescriptor{Status: status, Reason: "artifact_unavailable"}
		default: // corrupt
			b.artifacts[key] = exportArtifactDescriptor{Status: status, Reason: "artifact_checksum"}
		}
	}
	return nil
}

// spoolArtifact copies one artifact behind a reserved local header and
// returns its entry and status (included, missing or corrupt). Only a done
// ctx or a failing spool is an error.
func (b *exportBuilder) spoolArtifact(ctx context.Context, key string) (exportEntry, string, error) {
	e := exportEntry{name: exportArtifactsDir + key, offset: b.out.off}
	rollback := func(status string) (exportEntry, string, error) {
		b.out.seek(e.offset)
		if err := ctx.Err(); err != nil {
			return e, "", fmt.Errorf("read artifact %s: %w", key, err)
		}
		return e, status, nil
	}
	rc, err := b.src.OpenArtifact(ctx, key)
	if err != nil {
		return rollback(exportArtifactMissing)
	}
	// The verdict rests on the bytes read and their digest; closing the
	// reader afterwards cannot change them (Source: only errors opening or
	// reading make an artifact missing).
	defer func() { _ = rc.Close() }()
	b.out.seek(e.dataOffset())
	crc, sha := crc32.NewIEEE(), sha256.New()
	w := &exportHashWriter{w: b.out, crc: crc, sha: sha}
	n, err := io.Copy(w, rc)
	if w.err != nil {
		return e, "", fmt.Errorf("write bundle spool: %w", w.err)
	}
	if err != nil {
		return rollback(exportArtifactMissing)
	}
	sum := sha.Sum(nil)
	if hex.EncodeToString(sum) != key {
		return rollback(exportArtifactCorrupt)
	}
	e.size, e.crc, e.sha = n, crc.Sum32(), [32]byte(sum)
	return e, exportArtifactIncluded, nil
}

// exportHashWriter feeds CRC-32 and SHA-256 while writing; it keeps the
// writer's error apart from the reader's.
type exportHashWriter struct {
	w   io.Writer
	crc hash.Hash32
	sha hash.Hash
	err error
}

// Write implements io.Writer.
func (h *exportHashWriter) Write(p []byte) (int, error) {
	h.crc.Write(p)
	h.sha.Write(p)
	if _, err := h.w.Write(p); err != nil {
		h.err = err
		return 0, err
	}
	return len(p), nil
}

// exportRecordEncoder turns stored records into exported canonical lines.
type exportRecordEncoder struct {
	include bool
	rules   []compiledRule
	doc     journal.Doc // the payload being exported
	// general, set by tests, sends every payload through the general path
	// (payload), which the fast paths must match byte for byte.
	general bool
	tree    []byte // a redacted payload (valid until the next record)
	applied []*compiledRule
}

// appendLines appends the exported lines of recs to dst.
func (enc *exportRecordEncoder) appendLines(dst []byte, recs []journal.Record) ([]byte, error) {
	for i := range recs {
		var err error
		if dst, err = enc.appendLine(dst, recs[i]); err != nil {
			return dst, fmt.Errorf("encode record seq %d: %w", recs[i].Seq, err)
		}
	}
	return dst, nil
}

// appendLine appends rec's exported canonical JSON line and "\n" to dst.
// The record's 12 fields are written in key order; only the payload goes
// through the canonical encoder. On error dst keeps its length.
func (enc *exportRecordEncoder) appendLine(dst []byte, rec journal.Record) ([]byte, error) {
	doc, payload, capture, err := enc.payloadDoc(rec.Kind, rec.Payload)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	str := func(s string) {
		if err == nil {
			dst, err = journal.AppendCanonicalString(dst, s)
		}
	}
	dst = append(dst, `{"attempt_id":`...)
	str(rec.AttemptID)
	dst = append(dst, `,"capture":"`...)
	dst = append(dst, capture...)
	dst = append(dst, `","execution_key":`...)
	if rec.ExecutionKey == nil {
		dst = append(dst, "null"...)
	} else {
		str(*rec.ExecutionKey)
	}
	dst = append(dst, `,"id":`...)
	str(rec.ID)
	dst = append(dst, `,"kind":`...)
	str(string(rec.Kind))
	dst = append(dst, `,"payload":`...)
	switch {
	case payload != nil:
		dst = append(dst, payload...)
	case doc == nil:
		dst = append(dst, "null"...)
	default:
		dst = doc.AppendCanonical(dst)
	}
	dst = append(dst, `,"recorded_at":`...)
	str(rec.RecordedAt)
	dst = append(dst, `,"run_id":`...)
	str(rec.RunID)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, rec.Seq, 10)
	dst = append(dst, `,"session_id":`...)
	str(rec.SessionID)
	dst = append(dst, `,"step_id":`...)
	str(rec.StepID)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(rec.Version), 10)
	if err != nil {
		return dst[:start], err
	}
	return append(dst, "}\n"...), nil
}

// payloadDoc returns the exported payload, either parsed for canonical
// output (doc; both nil for null) or already in canonical form (text),
// and its capture status (REFERENCE §5.4); see payload. The Doc and text
// are valid until the next call.
func (enc *exportRecordEncoder) payloadDoc(kind journal.Kind, stored []byte) (doc *journal.Doc, text []byte, capture string, err error) {
	if !enc.include {
		return nil, nil, exportCaptureOmitted, nil
	}
	if len(stored) > 0 && !enc.general && !enc.anyRule(kind) {
		// Fast path: parse once; when auto-redaction certainly changes
		// nothing the stored payload is exported as it is. Anything else,
		// a parse error included, takes the general path.
		if err := enc.doc.Parse(stored, 1); err == nil {
			if enc.doc.IsNull() {
				return nil, nil, exportCaptureOmitted, nil
			}
			switch docRedactions(&enc.doc) {
			case redactNone:
				return &enc.doc, nil, exportCapturePresent, nil
			case redactKeysOnly:
				// Auto-redaction replaces the values of credential keys
				// and nothing else: write the Doc so, in one pass.
				text, changed := enc.doc.AppendCanonicalReplacing(enc.tree[:0], isCredentialKeyBytes, redactMarkerJSON)
				enc.tree = text
				if changed {
					return nil, text, exportCaptureRedacted, nil
				}
				return nil, text, exportCapturePresent, nil
			}
		}
	}
	out, capture, err := enc.payload(kind, stored)
	if err != nil {
		return nil, nil, "", err
	}
	if err := enc.doc.Parse(out, 1); err != nil {
		return nil, nil, "", err
	}
	if enc.doc.IsNull() {
		return nil, nil, capture, nil
	}
	return &enc.doc, nil, capture, nil
}

// anyRule reports whether a redaction rule applies to records of kind.
func (enc *exportRecordEncoder) anyRule(kind journal.Kind) bool {
	for i := range enc.rules {
		if enc.rules[i].applies(kind) {
			return true
		}
	}
	return false
}

// payload returns the exported payload JSON (possibly aliasing stored)
// and its capture status (REFERENCE §5.4).
func (enc *exportRecordEncoder) payload(kind journal.Kind, stored []byte) ([]byte, string, error) {
	if !enc.include {
		return []byte("null"), exportCaptureOmitted, nil
	}
	if len(stored) == 0 {
		stored = []byte("null")
	}
	enc.applied = enc.applied[:0]
	for i := range enc.rules {
		if enc.rules[i].applies(kind) {
			enc.applied = append(enc.applied, &enc.rules[i])
		}
	}
	if len(enc.applied) == 0 && !mightRedact(stored, 0) {
		// Fast path: auto-redaction would change nothing and no rule applies.
		if isPayloadNull(stored) {
			return []byte("null"), exportCaptureOmitted, nil
		}
		return stored, exportCapturePresent, nil
	}
	v, err := parsePayload(stored)
	if err != nil {
		return nil, "", fmt.Errorf("payload: %w", err)
	}
	autoChanged := autoRedact(&v)
	ruleChanged := false
	for _, r := range enc.applied {
		if r.apply(&v) {
			ruleChanged = true
		}
	}
	if autoRedact(&v) {
		autoChanged = true
	}
	if v.kind == pNull {
		return []byte("null"), exportCaptureOmitted, nil
	}
	if !autoChanged && !ruleChanged {
		return stored, exportCapturePresent, nil
	}
	out := v.appendJSON(enc.tree[:0])
	enc.tree = out
	if !ruleChanged {
		// Automatic redaction alone only ever replaces a value by one that
		// is not equal to it, so the payload certainly differs.
		return out, exportCaptureRedacted, nil
	}
	eq, err := journal.Equal(out, stored)
	if err != nil {
		return nil, "", fmt.Errorf("compare payload: %w", err)
	}
	if eq {
		return out, exportCapturePresent, nil
	}
	return out, exportCaptureRedacted, nil
}

// isPayloadNull reports whether b is the literal null (with JSON whitespace).
func isPayloadNull(b []byte) bool {
	i, j := 0, len(b)
	for i < j && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return string(b[i:j]) == "null"
}
