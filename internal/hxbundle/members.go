package hxbundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// Item 14 reads every member in the manifest's order and stops at the
// first one that fails (its descriptor, its ZIP data, its size, its
// digest). hxd reads members concurrently and then reports the first
// failure in that same order, so the verdict is the reference's. Each
// reader hashes its member as it streams; the lines of records.jsonl are
// additionally parsed by the record stream's goroutines (records.go), so
// that parsing overlaps hashing. Memory stays bounded: a chunk buffer per
// reader, a few line batches, nothing kept but digests (and, for
// playback, the records and artifacts).

// chunkSize is the unit members are streamed in.
const chunkSize = 256 << 10

// chunks are the pooled chunk buffers.
var chunks = sync.Pool{New: func() any {
	b := make([]byte, chunkSize)
	return &b
}}

// memberTask is one entry of the manifest's members, with what its
// descriptor says (read from the manifest before any goroutine starts:
// the parsed document is not safe for concurrent use).
type memberTask struct {
	name   string
	entry  *zipEntry
	descOK bool // the descriptor is an object
	// size is its size, if an integer literal that fits an int64 (sizeOK).
	size   int64
	sizeOK bool
	// sha is its sha256, if a string (shaOK).
	sha   string
	shaOK bool
	// Outcome.
	digest string
	kept   []byte
	fail   *failure
}

// check compares the member read with its descriptor.
func (t *memberTask) check(digest string, n int64) *failure {
	at := Detail{Member: printableName(t.name)}
	if !t.sizeOK || t.size != n {
		at.Message = fmt.Sprintf("the member has %d bytes", n)
		return &failure{msg: msgMemberSize, detail: at}
	}
	if !t.shaOK || t.sha != digest {
		at.Message = "SHA-256 of the member differs from the manifest"
		return &failure{msg: msgMemberChecksum, detail: at}
	}
	return nil
}

// checkMembers is item 14.
func (v *verifier) checkMembers() *failure {
	var tasks []*memberTask
	v.m.get("members").members(func(key, desc jv) bool {
		name, _ := key.str()
		t := &memberTask{name: name, entry: v.byName[name], descOK: desc.isObject()}
		if size := desc.get("size"); size.isInt() {
			t.size, t.sizeOK = size.int64()
		}
		t.sha, t.shaOK = desc.get("sha256").str()
		tasks = append(tasks, t)
		return true
	})
	v.digests = make(map[string]string, len(tasks))
	v.recs = newRecordStream(v)
	if v.keep {
		v.artifacts = make(map[string][]byte)
	}

	// Members after the first failure need not be read.
	var firstFail atomic.Int64
	firstFail.Store(int64(len(tasks)))
	failed := func(i int) {
		for {
			cur := firstFail.Load()
			if int64(i) >= cur || firstFail.CompareAndSwap(cur, int64(i)) {
				return
			}
		}
	}
	for i, t := range tasks {
		if !t.descOK {
			t.fail = &failure{msg: msgMemberDescriptor, detail: Detail{Member: printableName(t.name)}}
			failed(i)
			break
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(max(runtime.GOMAXPROCS(0), 1), len(tasks)) {
		wg.Go(func() {
			for i := range work {
				if int64(i) < firstFail.Load() {
					if v.readTask(tasks[i]) != nil {
						failed(i)
					}
				}
			}
		})
	}
	for i := range tasks {
		work <- i
	}
	close(work)
	wg.Wait()

	for _, t := range tasks {
		if t.fail != nil {
			return t.fail
		}
		v.digests[t.name] = t.digest
		if v.keep && t.name != memberRecords {
			v.artifacts[t.name] = t.kept
		}
	}
	return nil
}

// readTask reads one member and records its outcome.
func (v *verifier) readTask(t *memberTask) *failure {
	var digest string
	var n int64
	var f *failure
	switch {
	case t.name == memberRecords:
		digest, n, f = v.readRecords(t.entry)
	case v.keep:
		var kept bytes.Buffer
		kept.Grow(int(min(t.entry.usize, 1<<20)))
		digest, n, f = v.z.readMember(t.entry, func(b []byte) { kept.Write(b) })
		t.kept = kept.Bytes()
	default:
		digest, n, f = v.z.readMember(t.entry, nil)
	}
	if f == nil {
		f = t.check(digest, n)
	}
	t.digest, t.fail = digest, f
	return f
}

// readMember streams one member through SHA-256 (and sink), returning the
// hex digest and the byte count. It is safe for concurrent use.
func (z *zipArchive) readMember(e *zipEntry, sink func([]byte)) (string, int64, *failure) {
	mr, f := z.open(e)
	if f != nil {
		return "", 0, f
	}
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	buf := *bp
	h := sha256.New()
	var n int64
	for {
		k, err := mr.Read(buf)
		if k > 0 {
			h.Write(buf[:k])
			if sink != nil {
				sink(buf[:k])
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// memberReader reports each failure as a *memberError; anything
			// else would be a read error of the member's data.
			var me *memberError
			if errors.As(err, &me) {
				return "", 0, me.f
			}
			return "", 0, ioFailure(err, "member data")
		}
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// readRecords reads records.jsonl: this goroutine reads, hashes and
// splits it into lines, the record stream parses them in parallel.
func (v *verifier) readRecords(e *zipEntry) (string, int64, *failure) {
	digest, n, f := v.z.readMember(e, v.recs.feed)
	v.recs.finish()
	return digest, n, f
}
