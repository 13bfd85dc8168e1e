package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
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
	counts []int    // parameters per statement
	stmts  []wireStatement
}

// BEGIN and COMMIT of the fast path, prepared like its statements.
var (
	wireBegin  = wireStatement{"hxd_fast_begin", sqlBegin}
	wireCommit = wireStatement{"hxd_fast_commit", sqlCommit}
)

// wireStatement is a boundary statement: its SQL, and the name the fast
// path prepares it under on each connection the first time that connection
// sends it.
type wireStatement struct{ name, sql string }

var wireBatches = sync.Pool{New: func() any { return new(wireBatch) }}

func getWireBatch() *wireBatch { return wireBatches.Get().(*wireBatch) }

// release returns b to the pool, unless a huge group made it huge.
func (b *wireBatch) release() {
	const keep = 4 << 20
	if cap(b.buf) > keep {
		return
	}
	b.buf, b.spans, b.counts, b.stmts = b.buf[:0], b.spans[:0], b.counts[:0], b.stmts[:0]
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
func (b *wireBatch) end(start int) {
	b.spans = append(b.spans, [2]int{start, len(b.buf)})
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
	b.end(start)
}

// nullableTexts appends a text[] parameter whose nil elements are NULL.
func (b *wireBatch) nullableTexts(v []json.RawMessage) {
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
		b.buf = binary.BigEndian.AppendUint32(b.buf, uint32(len(s)))
		b.buf = append(b.buf, s...)
	}
	b.end(start)
}

// int8s appends a bigint[] parameter.
func (b *wireBatch) int8s(v []int64) {
	start := b.begin()
	b.arrayHeader(len(v), false, oidInt8)
	for _, n := range v {
		b.buf = binary.BigEndian.AppendUint32(b.buf, 8)
		b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(n))
	}
	b.end(start)
}

// timestamps appends a timestamptz[] parameter (microsecond precision).
func (b *wireBatch) timestamps(v []time.Time) {
	start := b.begin()
	b.arrayHeader(len(v), false, oidTimestamptz)
	for _, t := range v {
		b.buf = binary.BigEndian.AppendUint32(b.buf, 8)
		b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(pgMicros(t)))
	}
	b.end(start)
}

// int8 appends a bigint parameter.
func (b *wireBatch) int8(n int64) {
	start := b.begin()
	b.buf = binary.BigEndian.AppendUint64(b.buf, uint64(n))
	b.end(start)
}

// pgMicros is t in microseconds since PostgreSQL's epoch.
func pgMicros(t time.Time) int64 {
	return t.Unix()*1_000_000 + int64(t.Nanosecond()/1000) - pgEpoch.Unix()*1_000_000
}

// exec sends BEGIN, b's statements and COMMIT on conn in one round trip and
// returns the first error: a statement's (the server skips the rest; the
// transaction is left aborted for the caller to roll back) or a COMMIT
// that did not commit. Each statement is prepared on conn the first time
// (pgx keeps it; later calls cost a map lookup). The messages are encoded
// into b's pooled buffer and written straight to the socket
// (pgconn.SyncConn makes that safe); the replies are read with
// pgconn.ReceiveMessage, which keeps the connection's transaction status
// current. When the exchange breaks off half-way the connection is
// closed: its state is unknown.
func (b *wireBatch) exec(ctx context.Context, conn *pgx.Conn, onRow func(stmt int, values [][]byte)) (err error) {
	names := make([]string, 0, len(b.stmts)+2)
	for i, st := range append(append([]wireStatement{wireBegin}, b.stmts...), wireCommit) {
		sd, err := conn.Prepare(ctx, st.name, st.sql)
		if err != nil {
			return err
		}
		if want := b.params(i); len(sd.ParamOIDs) != want {
			return fmt.Errorf("fast statement %s takes %d parameters, not %d", st.name, len(sd.ParamOIDs), want)
		}
		names = append(names, sd.Name)
	}
	msg := b.encode(names)
	pc := conn.PgConn()
	defer func() {
		if err != nil && !errors.As(err, new(*pgconn.PgError)) {
			_ = pc.Close(context.WithoutCancel(ctx)) // the pool drops it
		}
	}()
	if err := pc.SyncConn(ctx); err != nil {
		return err
	}
	nc := pc.Conn()
	if d, ok := ctx.Deadline(); ok {
		_ = nc.SetWriteDeadline(d)
		defer func() { _ = nc.SetWriteDeadline(time.Time{}) }()
	}
	if _, err := nc.Write(msg); err != nil {
		return fmt.Errorf("send fast commit: %w", err)
	}
	return receiveFast(ctx, pc, onRow)
}

// receiveFast reads the replies to exec's messages up to ReadyForQuery and
// returns the first error, or an error when the last statement (COMMIT)
// did not commit. The rows of b's statement i go to onRow(i, values)
// (values are only valid during the call).
func receiveFast(ctx context.Context, pc *pgconn.PgConn, onRow func(stmt int, values [][]byte)) error {
	var first error
	tag := ""
	completed := 0 // CommandCompletes so far; BEGIN's is the first
	for {
		m, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case *pgproto3.ErrorResponse:
			if first == nil {
				first = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.DataRow:
			if completed > 0 {
				onRow(completed-1, m.Values)
			}
		case *pgproto3.CommandComplete:
			tag = string(m.CommandTag)
			completed++
		case *pgproto3.ReadyForQuery:
			if first != nil {
				return first
			}
			if tag != "COMMIT" {
				return fmt.Errorf("commit ended in %q", tag)
			}
			return nil
		}
	}
}

// params is the number of parameters of the i-th statement exec sends
// (0 for BEGIN and COMMIT).
func (b *wireBatch) params(i int) int {
	if i > 0 && i <= len(b.counts) {
		return b.counts[i-1]
	}
	return 0
}

// encode returns the frontend messages of the transaction, encoded after
// the parameters in b.buf: a Bind and an Execute per prepared statement
// (names: BEGIN, b's statements, COMMIT), all parameters binary, results
// text; then Sync.
func (b *wireBatch) encode(names []string) []byte {
	params := len(b.buf)
	out := slices.Grow(b.buf, params+len(b.spans)*4+len(names)*64)
	next := 0
	for i, name := range names {
		n := b.params(i)
		start := len(out)
		out = append(out, 'B', 0, 0, 0, 0)
		out = append(out, 0) // unnamed portal
		out = append(out, name...)
		out = append(out, 0)
		out = binary.BigEndian.AppendUint16(out, 1) // one format code for all parameters:
		out = binary.BigEndian.AppendUint16(out, 1) // binary
		out = binary.BigEndian.AppendUint16(out, uint16(n))
		for j := next; j < next+n; j++ {
			sp := b.spans[j]
			out = binary.BigEndian.AppendUint32(out, uint32(sp[1]-sp[0]))
			out = append(out, out[sp[0]:sp[1]]...)
		}
		out = binary.BigEndian.AppendUint16(out, 0) // results: text
		binary.BigEndian.PutUint32(out[start+1:], uint32(len(out)-start-1))
		next += n
		out = append(out, 'E', 0, 0, 0, 9, 0, 0, 0, 0, 0) // unnamed portal, all rows
	}
	out = append(out, 'S', 0, 0, 0, 4)
	b.buf = out
	return out[params:]
}
