package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The fast path (applyFast) sends its transaction at the protocol level:
// pgx's query builder encodes every parameter into a buffer it throws away
// after each statement and copies the result again into a write buffer it
// also throws away, so a group of boundaries (tens of KiB of JSON) cost
// several times its size in garbage; the Go runtime then spends more time
// on that garbage (GC, returning pages to the OS, faulting them back in)
// than on the commit, and takes the CPU from the database. Here every
// parameter is encoded once, in PostgreSQL's binary format, into a buffer
// reused from group to group.

// Element type OIDs of the arrays the fast statements take.
const (
	oidText        = 25
	oidInt8        = 20
	oidTimestamptz = 1184
)

// pgEpoch is the origin of PostgreSQL's binary timestamps.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// wireBatch is the statements of one fast transaction with their
// parameters, encoded into buf. Pooled: its buffers keep their capacity.
type wireBatch struct {
	buf    []byte
	spans  [][2]int // parameter value bounds in buf, in statement order
	nulls  []bool   // spans[i] is SQL NULL
	counts []int    // parameters per statement
	stmts  []wireStatement
}

// wireStatement is a statement of the fast path, prepared on each
// connection under its name the first time a connection sends it.
type wireStatement struct{ name, sql string }

var wireBatches = sync.Pool{New: func() any { return new(wireBatch) }}

func getWireBatch() *wireBatch { return wireBatches.Get().(*wireBatch) }

// release returns b to the pool, unless a huge group made it huge.
func (b *wireBatch) release() {
	const keep = 4 << 20
	if cap(b.buf) > keep {
		return
	}
	b.buf, b.spans, b.nulls, b.counts, b.stmts = b.buf[:0], b.spans[:0], b.nulls[:0], b.counts[:0], b.stmts[:0]
	wireBatches.Put(b)
}

// statement starts the next statement's parameters.
func (b *wireBatch) statement(st wireStatement) {
	b.stmts = append(b.stmts, st)
	b.counts = append(b.counts, 0)
}

// begin starts a parameter value and returns its start offset.
func (b *wireBatch) begin() int { return len(b.buf) }

// end closes the parameter value started at start.
func (b *wireBatch) end(start int, null bool) {
	b.spans = append(b.spans, [2]int{start, len(b.buf)})
	b.nulls = append(b.nulls, null)
	b.counts[len(b.counts)-1]++
}

// arrayHeader appends a one-dimensional array header of n elements.
func (b *wireBatch) arrayHeader(n int, hasNull bool, elem uint32) {
	null := int32(0)
	if hasNull {
		null = 1
	}
	b.buf = binary.BigEndian.AppendUint32(b.buf, 1) // dimensions
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(null))
	b.buf = binary.BigEndian.AppendUint32(b.buf, elem)
	b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(n)) // length
	b.buf = binary.BigEndian.AppendUint32(b.buf, 1)         // lower bound
}

// texts appends a text[] parameter.
func (b *wireBatch) texts(v []string) {
	start := b.begin()
	b.arrayHeader(len(v), false, oidText)
	for _, s := range v {
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(s)))
		b.buf = append(b.buf, s...)
	}
	b.end(start, false)
}

// nullableTexts appends a text[] parameter whose nil elements are NULL.
func (b *wireBatch) nullableTexts(v []*string) {
	start := b.begin()
	hasNull := false
	for _, s := range v {
		hasNull = hasNull || s == nil
	}
	b.arrayHeader(len(v), hasNull, oidText)
	for _, s := range v {
		if s == nil {
			b.buf = binary.BigEndian.AppendUint32(b.buf, 0xFFFFFFFF) // -1: NULL
			continue
		}
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(*s)))
		b.buf = append(b.buf, *s...)
	}
	b.end(start, false)
}

// int8s appends a bigint[] parameter.
func (b *wireBatch) int8s(v []int64) {
	start := b.begin()
	b.arrayHeader(len(v), false, oidInt8)
	for _, n := range v {
		b.buf = binary.BigEndian.AppendUint32(b.buf, 8)
		b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(n))
	}
	b.end(start, false)
}

// timestamps appends a timestamptz[] parameter (microsecond precision).
func (b *wireBatch) timestamps(v []time.Time) {
	start := b.begin()
	b.arrayHeader(len(v), false, oidTimestamptz)
	for _, t := range v {
		b.buf = binary.BigEndian.AppendUint32(b.buf, 8)
		b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(pgMicros(t)))
	}
	b.end(start, false)
}

// int8 appends a bigint parameter.
func (b *wireBatch) int8(n int64) {
	start := b.begin()
	b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(n))
	b.end(start, false)
}

// pgMicros is t in microseconds since PostgreSQL's epoch.
func pgMicros(t time.Time) int64 {
	return t.Unix()*1_000_000 + int64(t.Nanosecond()/1000) - pgEpoch.Unix()*1_000_000
}

// exec sends BEGIN, b's statements and COMMIT on conn in one round trip and
// returns the first error: a statement's (the server skips the rest, and
// the transaction is left aborted for the caller to roll back) or a COMMIT
// that did not commit. Each statement is prepared on conn the first time
// (pgx keeps it; later calls cost a map lookup).
func (b *wireBatch) exec(ctx context.Context, conn *pgx.Conn) error {
	descs := make([]*pgconn.StatementDescription, len(b.stmts))
	for i, st := range b.stmts {
		sd, err := conn.Prepare(ctx, st.name, st.sql)
		if err != nil {
			return err
		}
		descs[i] = sd
	}
	values := make([][]byte, len(b.spans))
	for i, sp := range b.spans {
		if !b.nulls[i] {
			values[i] = b.buf[sp[0]:sp[1]:sp[1]]
		}
	}
	formats := make([]int16, 0, 8)
	batch := &pgconn.Batch{}
	batch.ExecParams(sqlBegin, nil, nil, nil, nil)
	next := 0
	for i, sd := range descs {
		n := b.counts[i]
		if len(sd.ParamOIDs) != n {
			return fmt.Errorf("fast statement %d takes %d parameters, not %d", i, len(sd.ParamOIDs), n)
		}
		formats = formats[:0]
		for range n {
			formats = append(formats, pgx.BinaryFormatCode)
		}
		batch.ExecPrepared(sd.Name, values[next:next+n], formats, nil)
		next += n
	}
	batch.ExecParams(sqlCommit, nil, nil, nil, nil)
	results, err := conn.PgConn().ExecBatch(ctx, batch).ReadAll()
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	if len(results) != len(descs)+2 {
		return fmt.Errorf("fast commit: %d results for %d statements", len(results), len(descs)+2)
	}
	if tag := results[len(results)-1].CommandTag.String(); tag != "COMMIT" {
		return fmt.Errorf("commit ended in %s", tag)
	}
	return nil
}
